# kvfold's dependencies (Debian packages), found the same way by kvfold's
# own build and by an installed kvfoldConfig.cmake. The C libraries without
# CMake packages (nats.c, RocksDB, zstd) become imported targets.
include_guard(GLOBAL)

find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(OpenSSL REQUIRED)
# The S3 transport: libcurl signs with SigV4 (CURLOPT_AWS_SIGV4, 7.75+).
find_package(CURL 7.75 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)

find_library(NATS_LIB nats REQUIRED)
find_path(NATS_INCLUDE nats/nats.h REQUIRED)
find_library(ROCKSDB_LIB rocksdb REQUIRED)
find_path(ROCKSDB_INCLUDE rocksdb/db.h REQUIRED)
find_library(ZSTD_LIB zstd REQUIRED)
find_path(ZSTD_INCLUDE zstd.h REQUIRED)

foreach(dep IN ITEMS nats:NATS rocksdb:ROCKSDB zstd:ZSTD)
  string(REPLACE ":" ";" parts "${dep}")
  list(GET parts 0 name)
  list(GET parts 1 var)
  if(NOT TARGET kvfold::${name})
    add_library(kvfold::${name} UNKNOWN IMPORTED GLOBAL)
    set_target_properties(kvfold::${name} PROPERTIES
      IMPORTED_LOCATION "${${var}_LIB}"
      INTERFACE_INCLUDE_DIRECTORIES "${${var}_INCLUDE}")
  endif()
endforeach()
