# The Debian package (scripts/package.sh): `cpack -G DEB` over the install
# rules of a build configured with -DCMAKE_INSTALL_PREFIX=/usr and
# -DKVFOLD_INSTALL_SERVICE=ON. Dependencies come from dpkg-shlibdeps.

if(KVFOLD_INSTALL_SERVICE)
  install(FILES deploy/systemd/kvfold-mirror@.service DESTINATION lib/systemd/system)
  install(FILES deploy/systemd/kvfold.sysusers DESTINATION lib/sysusers.d RENAME kvfold.conf)
  install(FILES deploy/mirror.env DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
  install(DIRECTORY deploy/grafana deploy/prometheus DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kvfold)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "mirror a NATS JetStream KV bucket into a durable local RocksDB fold")
set(CPACK_PACKAGE_DESCRIPTION
    "kvfold keeps a local RocksDB copy of a NATS JetStream KV bucket correct across restarts and "
    "retention evictions, exports and seeds snapshot artifacts, and runs as the systemd service "
    "kvfold-mirror@.service. The package holds the kvfold command, the library, its headers, "
    "CMake package and pkg-config file.")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "kvfold developers")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/postinst
    ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/prerm
    ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
include(CPack)
