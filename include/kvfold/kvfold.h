// kvfold: mirror a NATS JetStream KV bucket into a durable local fold.
// The umbrella header; each included header documents its own contract.

#ifndef KVFOLD_KVFOLD_H_
#define KVFOLD_KVFOLD_H_

#include "kvfold/artifact.h"
#include "kvfold/artifact_source.h"
#include "kvfold/audit.h"
#include "kvfold/bucket.h"
#include "kvfold/change.h"
#include "kvfold/clock.h"
#include "kvfold/connection.h"
#include "kvfold/fold.h"
#include "kvfold/health.h"
#include "kvfold/lease.h"
#include "kvfold/log_line.h"
#include "kvfold/metrics_text.h"
#include "kvfold/mirror.h"
#include "kvfold/repair.h"
#include "kvfold/retention.h"
#include "kvfold/scheduled_export.h"
#include "kvfold/scope.h"
#include "kvfold/status.h"
#include "kvfold/transport.h"
#include "kvfold/watch_metrics.h"
#include "kvfold/watcher.h"

#endif  // KVFOLD_KVFOLD_H_
