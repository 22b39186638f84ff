#!/usr/bin/env python3
"""A reliableq command handler in Python: sends a receipt e-mail, once.

    reliableq worker --exec "ReceiptJob=python3 send_receipt.py" \
                     --exec-env OUTBOX=/var/spool/receipts

The job's JSON arrives on stdin (args: [order_id, address]). Exit status 0 is
success; anything else is a failure, retried as Sidekiq retries, with the end
of stderr as the job's error_message.

Delivery is at least once: a worker killed while this runs gives the job back
and it runs again. So the receipt is written under the job's jid, the
idempotency key: a second run of the same job finds it and sends nothing.
Here "sending" is writing the message into OUTBOX; a real handler would pass
the jid to its mail provider's idempotency key instead.
"""
import json
import os
import sys

job = json.load(sys.stdin)
args = job.get("args", [])
if len(args) != 2 or not all(isinstance(a, str) and a for a in args):
    print("ReceiptJob expects args [order_id, address], got %r" % (args,), file=sys.stderr)
    sys.exit(2)
order_id, address = args

outbox = os.environ["OUTBOX"]
path = os.path.join(outbox, job["jid"] + ".eml")
try:
    # O_EXCL: only the first run of this jid creates the message.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
except FileExistsError:
    print("receipt for order %s already sent (retry %s, interrupted %s)" % (
        order_id, os.environ.get("RELIABLEQ_RETRY_COUNT", "-"),
        os.environ["RELIABLEQ_INTERRUPTED_COUNT"]))
    sys.exit(0)
with os.fdopen(fd, "w") as message:
    message.write("To: %s\nSubject: Your receipt for order %s\n\nThank you.\n" % (address, order_id))
print("receipt for order %s sent to %s" % (order_id, address))
