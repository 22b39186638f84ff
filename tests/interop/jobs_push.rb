# The Ruby side of "Ruby pushes, reliableq runs" (tests/interop/jobs_test.cc):
# pushes jobs with the Sidekiq 6.4.1 client the way a Rails app does, and
# writes what it pushed, so that the test can check that a reliableq handler
# saw exactly these jobs.
#
# usage: ruby jobs_push.rb REDIS_URL OUT.json [plain|bignum|fleet COUNT MILLIS|sequence COUNT]
#
#   plain   (the default) Sidekiq::Client.push, perform_async, perform_in,
#           push_bulk and ActiveJob-style wrapped jobs (immediate and
#           scheduled), with unicode, nested, empty, nil, boolean, integer
#           (up to 64 bits) and float arguments
#   bignum  integers beyond 64 bits, which Ruby's JSON writes as plain
#           integer literals
#   fleet   COUNT RecordJob jobs ["ruby-<i>", MILLIS] in queue "fleet", in
#           one push_bulk
#   sequence COUNT jobs [customer, i] for each of 10 customers in queue
#           "sequenced", each in its customer's sequence, and COUNT jobs
#           ["ledger", i] of a class whose sidekiq_options name sequence
#           "ledger"
#
# OUT.json: {"sidekiq": VERSION, "jobs": [EXPECTED, ...]} where
#   EXPECTED = {"how": "Client.push" | "perform_async" | ..., "jid": ...,
#               "class": ..., "wrapped": String | null, "queue": ...,
#               "args": [...], "args_json": JSON.generate(args),
#               "retry": ..., "at": Float | null}
# Prints "jobs_push: N jobs" on success.

require "json"
require "securerandom"
require "time"
require "sidekiq"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

url, out_path, mode, fleet_count, fleet_millis = ARGV
mode ||= "plain"
abort("usage: jobs_push.rb REDIS_URL OUT.json [plain|bignum|fleet COUNT MILLIS|sequence COUNT]") unless
  url && out_path
abort("jobs_push: unknown mode #{mode}") unless %w[plain bignum fleet sequence].include?(mode)

Sidekiq.configure_client { |config| config.redis = {url: url} }

# A plain Sidekiq job class, as an app defines it.
class InteropJob
  include Sidekiq::Worker
  sidekiq_options queue: "interop", retry: 5
end

# What Rails' Sidekiq adapter pushes: the class is its JobWrapper, "wrapped"
# is the ActiveJob class, args is [job.serialize]. Only the names matter
# here; this process never runs a job.
module ActiveJob
  module QueueAdapters
    class SidekiqAdapter
      class JobWrapper
        include Sidekiq::Worker
      end
    end
  end
end

class GreetingJob
end

# Per-customer payment events, each push naming its customer's sequence.
class PaymentEventJob
  include Sidekiq::Worker
  sidekiq_options queue: "sequenced"
end

# Every job of this class in one sequence: the per-class switch.
class LedgerJob
  include Sidekiq::Worker
  sidekiq_options queue: "sequenced", sequence: "ledger"
end

# Every JSON-native kind of value a Ruby app may pass.
RICH_ARGS = [
  "caf\u00e9 \u2603 \u{1F600}",  # é, a BMP symbol, an emoji outside the BMP
  "",
  [],
  {},
  nil,
  true,
  false,
  0,
  -1,
  2**31,
  -(2**31) - 1,
  2**53 + 1,      # not exact in a double
  2**63 - 1,
  -(2**63),
  2**64 - 1,
  0.1,
  -2.5,
  3.0,
  -0.0,
  1.0e20,
  1.0e-7,
  123456789.123456789,
  {
    "nested" => {
      "list" => [1, [2, [3, {"deep" => nil}]]],
      "\u00fcn\u00efc\u00f6d\u00e9" => "\u2603",
    },
    "a/b" => "x/y",
    "quote" => "he said \"hi\" \\o/",
    "control" => "tab\tnewline\n\u0001\u007f",
    "empty" => {"s" => "", "a" => [], "h" => {}},
    "numbers" => [-0.5, 1e300, 7],
  },
].freeze

BIGNUM_ARGS = [2**64, 2**70, -(2**65), [2**100, {"big" => 10**30}]].freeze

# The hash ActiveJob::Base#serialize returns (Rails 7), arguments included
# the way ActiveJob serializes them.
def active_job_payload(queue, arguments)
  {
    "job_class" => "GreetingJob",
    "job_id" => SecureRandom.uuid,
    "provider_job_id" => nil,
    "queue_name" => queue,
    "priority" => nil,
    "arguments" => arguments,
    "executions" => 0,
    "exception_executions" => {},
    "locale" => "en",
    "timezone" => "UTC",
    "enqueued_at" => Time.now.utc.iso8601(9),
  }
end

$expected = []

def expect(how, jid, klass:, args:, queue:, retry_value:, wrapped: nil, at: nil)
  raise "#{how}: no jid (a client middleware stopped the push?)" unless jid.is_a?(String)
  $expected << {
    "how" => how, "jid" => jid, "class" => klass, "wrapped" => wrapped, "queue" => queue,
    "args" => args, "args_json" => JSON.generate(args), "retry" => retry_value, "at" => at,
  }
end

if mode == "plain"
  jid = Sidekiq::Client.push("class" => "InteropJob", "queue" => "interop", "args" => RICH_ARGS,
                             "retry" => 3, "tags" => ["interop", "ruby"])
  expect("Client.push", jid, klass: "InteropJob", args: RICH_ARGS, queue: "interop",
         retry_value: 3)

  jid = InteropJob.perform_async(*RICH_ARGS)
  expect("perform_async", jid, klass: "InteropJob", args: RICH_ARGS, queue: "interop",
         retry_value: 5)

  jid = InteropJob.set(queue: "interop_low").perform_async("low", {"n" => 1})
  expect("set(queue).perform_async", jid, klass: "InteropJob", args: ["low", {"n" => 1}],
         queue: "interop_low", retry_value: 5)

  before = Time.now.to_f
  jid = InteropJob.perform_in(1, "in one second", RICH_ARGS.last)
  expect("perform_in", jid, klass: "InteropJob", args: ["in one second", RICH_ARGS.last],
         queue: "interop", retry_value: 5, at: before + 1)

  bulk = [[1], [2, "two"], [{"three" => 3.0}], [], [nil, [nil]], RICH_ARGS]
  jids = Sidekiq::Client.push_bulk("class" => "InteropJob", "queue" => "interop", "args" => bulk)
  raise "push_bulk returned #{jids.inspect}" unless jids.is_a?(Array) && jids.size == bulk.size
  jids.zip(bulk).each do |bulk_jid, args|
    # A class given by name gets Sidekiq's default options, not the class's.
    expect("push_bulk", bulk_jid, klass: "InteropJob", args: args, queue: "interop",
           retry_value: true)
  end

  # ActiveJob through Rails' adapter: GreetingJob.perform_later(...) and
  # GreetingJob.set(wait: 1.second).perform_later(...).
  wrapper = ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper
  arguments = [
    "Ada \u2603 \u{1F600}",
    {"name" => "Ada", "tags" => ["a", "b"], "_aj_symbol_keys" => ["name", "tags"]},
    {"_aj_globalid" => "gid://app/User/1"},
    [1, 2.5, nil, true],
  ]
  args = [active_job_payload("interop", arguments)]
  jid = Sidekiq::Client.push("class" => wrapper, "wrapped" => GreetingJob, "queue" => "interop",
                             "args" => args)
  expect("ActiveJob perform_later", jid, klass: wrapper.to_s, wrapped: "GreetingJob",
         args: args, queue: "interop", retry_value: true)

  at = Time.now.to_f + 1
  args = [active_job_payload("interop", ["later"])]
  jid = Sidekiq::Client.push("class" => wrapper, "wrapped" => GreetingJob, "queue" => "interop",
                             "args" => args, "at" => at)
  expect("ActiveJob set(wait).perform_later", jid, klass: wrapper.to_s, wrapped: "GreetingJob",
         args: args, queue: "interop", retry_value: true, at: at)
elsif mode == "fleet"
  millis = Integer(fleet_millis)
  bulk = (0...Integer(fleet_count)).map { |i| ["ruby-#{i}", millis] }
  jids = Sidekiq::Client.push_bulk("class" => "RecordJob", "queue" => "fleet", "args" => bulk)
  raise "push_bulk returned #{jids.inspect}" unless jids.is_a?(Array) && jids.size == bulk.size
  jids.zip(bulk).each do |bulk_jid, args|
    expect("push_bulk", bulk_jid, klass: "RecordJob", args: args, queue: "fleet",
           retry_value: true)
  end
elsif mode == "sequence"
  # COUNT jobs for each of 10 customers, interleaved, pushed each of the
  # three ways a Rails app sets a sequence: Job.set(sequence:), the push
  # hash, and a class whose sidekiq_options name one key for all its jobs.
  count = Integer(fleet_count)
  (0...count).each do |i|
    (0...10).each do |c|
      args = ["cus_#{c}", i]
      jid = if c.even?
        PaymentEventJob.set(sequence: "cus_#{c}").perform_async(*args)
      else
        Sidekiq::Client.push("class" => "PaymentEventJob", "queue" => "sequenced",
                             "args" => args, "sequence" => "cus_#{c}")
      end
      expect("sequence", jid, klass: "PaymentEventJob", args: args, queue: "sequenced",
             retry_value: true)
    end
    args = ["ledger", i]
    jid = LedgerJob.perform_async(*args)
    expect("sidekiq_options sequence", jid, klass: "LedgerJob", args: args, queue: "sequenced",
           retry_value: true)
  end
else
  jid = Sidekiq::Client.push("class" => "InteropJob", "queue" => "interop", "args" => BIGNUM_ARGS)
  expect("Client.push", jid, klass: "InteropJob", args: BIGNUM_ARGS, queue: "interop",
         retry_value: true)
end

File.write(out_path, JSON.generate({"sidekiq" => Sidekiq::VERSION, "jobs" => $expected}))
puts "jobs_push: #{$expected.size} jobs"
