// kvfold: mirror a NATS KV bucket into a local fold, and read it.

#include <iostream>

#include "cli/commands.h"
#include "cli/logger.h"
#include "kvfold/fold.h"

namespace kvfold::cli {

int Report(const std::string& command, const Status& status) {
  if (status.ok()) return kExitOk;
  Logger& log = Log();
  log.set_command(command);
  log.Error(status.ToString());
  if (status.IsCursorExpired()) return kExitCursorExpired;
  if (status.IsInvalidArgument()) return kExitUsage;
  return kExitFailure;
}

}  // namespace kvfold::cli

int main(int argc, char** argv) {
  using namespace kvfold::cli;
  // A fold keeps every table file open (kvfold/fold.h). A limit that
  // cannot be raised stays as it was: only a large fold needs more.
  (void)kvfold::RaiseOpenFileLimit();
  CLI::App app{"kvfold: mirror a NATS JetStream KV bucket into a durable local fold"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kvfold 0.1.0");
  // Log flags go before or after the subcommand: kvfold -q mirror ... or
  // kvfold mirror ... --log-format json.
  LogFlags log_flags;
  AddLogFlags(&app, &log_flags);
  app.fallthrough();
  Runner mirror = AddMirrorCommand(app);
  Runner dump = AddDumpCommand(app);
  Runner status = AddStatusCommand(app);
  Runner scan = AddScanCommand(app);
  Runner get = AddGetCommand(app);
  Runner export_ = AddExportCommand(app);
  Runner seed = AddSeedCommand(app);
  Runner artifacts = AddArtifactsCommand(app);
  Runner audit = AddAuditCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  Log().Configure(log_flags);
  for (const CLI::App* sub : app.get_subcommands()) {
    std::string name = sub->get_name();
    for (const CLI::App* inner : sub->get_subcommands()) name += " " + inner->get_name();
    Log().set_command(name);
  }
  if (app.got_subcommand("mirror")) return mirror();
  if (app.got_subcommand("dump")) return dump();
  if (app.got_subcommand("status")) return status();
  if (app.got_subcommand("scan")) return scan();
  if (app.got_subcommand("get")) return get();
  if (app.got_subcommand("export")) return export_();
  if (app.got_subcommand("seed")) return seed();
  if (app.got_subcommand("artifacts")) return artifacts();
  if (app.got_subcommand("audit")) return audit();
  return kExitUsage;
}
