#!/bin/sh
# A reliableq command handler in shell: removes a customer's export files.
#
#   reliableq worker --exec "CleanupJob=/usr/local/lib/jobs/cleanup.sh" \
#                    --exec-env EXPORT_DIR=/srv/exports
#
# The job's JSON is on stdin and in $RELIABLEQ_JOB; its jid, class, queue and
# how often it may have run before are in RELIABLEQ_* variables. Without a
# JSON parser at hand, the customer id is taken from the args with sed: the
# job is pushed as {"class":"CleanupJob","args":["<id>"]}. Exit status 0 is
# success; anything else, or a signal, is a failure whose error_message ends
# with what this wrote to stderr.
#
# Running twice is harmless: rm -f of files already gone succeeds.
set -eu

customer=$(printf '%s' "$RELIABLEQ_JOB" | sed -n 's/.*"args":\["\([A-Za-z0-9_-]*\)"\].*/\1/p')
if [ -z "$customer" ]; then
  echo "CleanupJob expects args [customer_id] (letters, digits, _ and -)" >&2
  exit 2
fi
rm -f "$EXPORT_DIR/$customer".*
echo "$RELIABLEQ_JID removed the exports of $customer (interrupted before: $RELIABLEQ_INTERRUPTED_COUNT)"
