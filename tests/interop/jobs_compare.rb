# Compares what reliableq handlers saw with what jobs_push.rb pushed, with
# Ruby's own idea of equal JSON values: an Integer is not a Float, 2**64 is
# not 1.8446744073709552e+19, and the order of a hash's keys counts.
#
# usage: ruby jobs_compare.rb PUSHED.json SEEN.json [bignums-as-floats]
#
# With bignums-as-floats the handlers' args are expected to hold integers
# beyond 64 bits as the nearest Float, as include/reliableq/handler.h says
# JobView::args() gives them; the stored payload must still hold them exact.
#
# PUSHED is jobs_push.rb's output. SEEN is written by tests/interop/jobs_test.cc:
#   [{"jid":..., "class":..., "wrapped": String | null, "queue":...,
#     "args": the handler's args as it wrote them, "raw": the payload string,
#     "ran_at": epoch seconds}, ...]
#
# Prints each failed check on stderr and exits 1 if there was any; prints
# "jobs_compare: N checks passed" and exits 0 otherwise.

require "json"
require_relative "check_helper"

pushed_path, seen_path, handler_numbers = ARGV
abort("usage: jobs_compare.rb PUSHED.json SEEN.json [bignums-as-floats]") unless
  pushed_path && seen_path && [nil, "", "bignums-as-floats"].include?(handler_numbers)

pushed = JSON.parse(File.read(pushed_path))
seen = JSON.parse(File.read(seen_path))

# JSON.generate is a function of the value alone (types, digits, key order),
# so two values are the same exactly when these strings are.
def canonical(value)
  JSON.generate(value)
end

# `value` with every Integer outside both 64-bit ranges as the nearest Float.
def bignums_as_floats(value)
  case value
  when Integer then value < -2**63 || value > 2**64 - 1 ? value.to_f : value
  when Array then value.map { |v| bignums_as_floats(v) }
  when Hash then value.transform_values { |v| bignums_as_floats(v) }
  else value
  end
end

check("Sidekiq is 6.4.1, not #{pushed["sidekiq"]}", pushed["sidekiq"] == "6.4.1")

runs = seen.group_by { |job| job["jid"] }
expected_jids = pushed["jobs"].map { |job| job["jid"] }
(runs.keys - expected_jids).each { |jid| check("ran #{jid}, which was never pushed", false) }

pushed["jobs"].each do |want|
  where = "#{want["how"]} #{want["jid"]}"
  got = runs.fetch(want["jid"], [])
  next unless check("#{where}: ran #{got.size} times, not once", got.size == 1)
  got = got.first

  check("#{where}: class #{got["class"].inspect}, pushed #{want["class"].inspect}",
    got["class"] == want["class"])
  check("#{where}: wrapped #{got["wrapped"].inspect}, pushed #{want["wrapped"].inspect}",
    got["wrapped"] == want["wrapped"])
  check("#{where}: queue #{got["queue"].inspect}, pushed #{want["queue"].inspect}",
    got["queue"] == want["queue"])
  handler_args = want["args_json"]
  if handler_numbers == "bignums-as-floats"
    handler_args = canonical(bignums_as_floats(JSON.parse(handler_args)))
    check("#{where}: pushed no integer beyond 64 bits", handler_args != want["args_json"])
  end
  check("#{where}: the handler's args\n  #{canonical(got["args"])}\nare not the pushed\n  " \
        "#{handler_args}", canonical(got["args"]) == handler_args)

  payload = JSON.parse(got["raw"])
  check("#{where}: stored args differ from the pushed ones",
    canonical(payload["args"]) == want["args_json"])
  check("#{where}: stored retry #{payload["retry"].inspect}, pushed #{want["retry"].inspect}",
    canonical(payload["retry"]) == canonical(want["retry"]))
  %w[created_at enqueued_at].each do |field|
    check("#{where}: #{field} #{payload[field].inspect} is not float seconds",
      payload[field].is_a?(Float) && payload[field] > 1.0e9 && payload[field] < 1.0e11)
  end

  if want["at"]
    # Scheduled: it ran once due, after the poller moved it to its queue.
    check("#{where}: ran at #{got["ran_at"]}, before it was due at #{want["at"]}",
      got["ran_at"] >= want["at"] - 0.01)
    check("#{where}: ran at #{got["ran_at"]}, long after it was due at #{want["at"]}",
      got["ran_at"] < want["at"] + 15)
    check("#{where}: enqueued_at #{payload["enqueued_at"]} before it was due",
      payload["enqueued_at"].is_a?(Float) && payload["enqueued_at"] >= want["at"] - 0.01)
  end

  if want["wrapped"]
    # ActiveJob's own dispatch key is inside the serialized job.
    check("#{where}: args[0][\"job_class\"] is not the wrapped class",
      got["args"].is_a?(Array) && got["args"][0].is_a?(Hash) &&
      got["args"][0]["job_class"] == want["wrapped"])
  end
end

Checks.finish("jobs_compare")
