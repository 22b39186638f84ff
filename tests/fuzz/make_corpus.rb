#!/usr/bin/env ruby
# frozen_string_literal: true

# Writes the seed corpus of the codec's fuzz targets (tests/fuzz/corpus/):
# job payloads exactly as Sidekiq 6.4.1 (the Debian ruby-sidekiq package)
# writes them, through its own client and retry handler, with a fake Redis
# that keeps what they send. A few hand-written payloads that Sidekiq never
# writes but may read (duplicate names, escapes) close the list.
#
#   ruby tests/fuzz/make_corpus.rb [DIR]     (default: tests/fuzz/corpus)
#
# Jids and times differ on every run; the file names do not.

require "fileutils"
require "json"
require "sidekiq"
require "sidekiq/job_retry"

dir = ARGV[0] || File.join(__dir__, "corpus")
FileUtils.mkdir_p(dir)

# Redis as Sidekiq's client and retry handler use it: every payload written
# is kept, with where it went.
class FakeRedis
  attr_reader :written

  def initialize
    @written = []
  end

  def with
    yield self
  end

  def pipelined
    yield self
  end

  def multi
    yield self
  end

  def sadd(*) = nil

  def lpush(key, payloads)
    Array(payloads).each { |payload| @written << [key, payload] }
  end

  def zadd(key, *members)
    members = members.first if members.size == 1 && members.first.is_a?(Array)
    members = [members] unless members.first.is_a?(Array)
    members.each { |_score, payload| @written << [key, payload] }
  end
end

REDIS = FakeRedis.new
def Sidekiq.redis
  yield REDIS
end

def push(item)
  before = REDIS.written.size
  Sidekiq::Client.new(REDIS).push(item)
  REDIS.written[before..].map(&:last)
end

def push_bulk(item)
  before = REDIS.written.size
  Sidekiq::Client.new(REDIS).push_bulk(item)
  REDIS.written[before..].map(&:last)
end

# The payload after one more failure, as Sidekiq's retry handler writes it.
def fail_once(payload, error_class, message, backtrace, queue: "default")
  error = error_class.new(message)
  error.set_backtrace(backtrace)
  before = REDIS.written.size
  Sidekiq::JobRetry.new.send(:attempt_retry, nil, JSON.parse(payload), queue, error)
  REDIS.written[before..].last.last
end

BACKTRACE = [
  "app/jobs/hard_job.rb:12:in `perform'",
  "/usr/lib/ruby/vendor_ruby/sidekiq/processor.rb:196:in `execute_job'",
  "/usr/lib/ruby/vendor_ruby/sidekiq/processor.rb:164:in `block (2 levels) in process'",
  "app/lib/caf\u00e9/\u65e5\u672c.rb:3:in `<top (required)>'"
].freeze

seeds = {}
seeds["plain"] = push("class" => "HardJob", "args" => [42, "bob"]).first
seeds["nested-args"] = push("class" => "Billing::InvoiceJob",
  "args" => [{"user" => {"id" => 1, "tags" => %w[a b], "nil" => nil},
              "opts" => [1.5, nil, true, false, {}]}, [[[[]]]], []]).first
seeds["unicode"] = push("class" => "UnicodeJob", "queue" => "mails",
  "args" => ["\u00e9/\u00fc", "\u65e5\u672c\u8a9e", "\u{1F600}", "\u2028\u2029",
             "quote\" back\\slash \n\t\r\b\f \u0001\u001f \u007f", "\u0000 nul"]).first
seeds["wide-integers"] = push("class" => "BigJob",
  "args" => [2**64, -(2**63) - 1, 123456789012345678901234567890, 2**64 - 1, -(2**63),
             [-(2**65)], {"n" => 10**25}, 0.1, 1.0e-07, 1.0e300, -0.0, 100.0, 1700000000.1234567],
  "big" => 99999999999999999999).first
seeds["scheduled"] = push("class" => "LaterJob", "args" => [1], "at" => Time.now.to_f + 3600).first
seeds["options"] = push("class" => "PickyJob", "args" => ["x"], "queue" => "critical",
  "retry" => 5, "backtrace" => true, "retry_queue" => "low", "dead" => false,
  "tags" => ["alpha", "b/c"], "custom" => {"trace_id" => "abc", "depth" => [1, [2, [3]]]}).first
seeds["retry-false"] = push("class" => "OnceJob", "args" => [], "retry" => false).first
seeds["retry-zero"] = push("class" => "DeadOnFailJob", "args" => [nil], "retry" => 0).first
seeds["activejob"] = push("class" => "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper",
  "wrapped" => "UserMailer", "queue" => "mailers",
  "args" => [{"job_class" => "UserMailer", "job_id" => "1b2c", "provider_job_id" => nil,
              "queue_name" => "mailers", "priority" => nil,
              "arguments" => ["welcome", {"_aj_symbol_keys" => [], "id" => 7}],
              "executions" => 0, "exception_executions" => {}, "locale" => "en",
              "timezone" => "UTC", "enqueued_at" => "2024-01-01T00:00:00Z"}]).first
push_bulk("class" => "BulkJob", "args" => [[1], [2], ["three"]]).each_with_index do |payload, i|
  seeds["bulk-#{i}"] = payload
end

# Retried jobs, through Sidekiq's own retry bookkeeping.
first = fail_once(seeds["options"], RuntimeError, "boom", BACKTRACE)
seeds["retried-once"] = first
seeds["retried-twice"] = fail_once(first, NoMethodError,
  "undefined method `x' for nil:NilClass", BACKTRACE, queue: "low")
limited = push("class" => "HardJob", "args" => [1, "two"], "backtrace" => 2).first
thrice = limited
%w[a b c].each { |message| thrice = fail_once(thrice, ArgumentError, message, BACKTRACE) }
seeds["retried-backtrace-2"] = thrice
long = "caf\u00e9 \u{1F600} ".b * 2000 + "\xff\xfe tail".b
seeds["retried-long-message"] = fail_once(seeds["unicode"], IOError, long, BACKTRACE.reverse)
seeds["retried-wide"] = fail_once(seeds["wide-integers"], KeyError, "key not found: :big", [])

# Never written by Sidekiq, but read by it: what a hand-made or foreign
# payload may hold.
seeds["edge-duplicates"] = '{"class":"First","args":[1],"queue":"a","class":"Last",' \
                           '"args":[{"k":1,"k":2}],"retry_count":1,"retry_count":4}'
seeds["edge-spacing-escapes"] = " { \"class\" : \"A\\u00e9\\/\" , \"args\" : [ 1 , 2.50 ," \
                                " \"\\ud83d\\ude00\", -0, 1E2 ] , \"retry_count\" : null } "
seeds["edge-minimal"] = '{"class":"A","args":[]}'

# What the fuzzers found (tests/unit/job_codec_test.cc has a test for each).
seeds["found-zero-decimals"] = '{"class":"A","args":[0.00000000000000000000000,' \
                               '-0.0000000000000000000000000000e5,1.7976931348623157e308]}'
seeds["found-lone-surrogate"] = '{"class":"A\\udc00","args":["\\udfff",["\\ud83d\\ude00"]],' \
                                '"k\\udc00":1,"backtrace":true}'
seeds["found-retry-count-max"] = '{"class":"A","args":[],"retry_count":9223372036854775806}'
seeds["found-huge-times"] = '{"class":"A","args":[],"created_at":1.0e+300,' \
                            '"enqueued_at":1.7976931348623157e+308}'
# Ruby refuses these, and so must reliableq.
refused = {
  "found-nul-after-job" => "{\"class\":\"A\",\"args\":[]}\0{\"class\":\"B\"}",
  "edge-trailing-text" => '{"class":"A","args":[]} xyz'
}

seeds.each do |name, payload|
  JSON.parse(payload) # every seed is a payload Ruby reads
  File.binwrite(File.join(dir, "#{name}.json"), payload)
end
refused.each do |name, payload|
  begin
    JSON.parse(payload)
    abort "make_corpus: Ruby reads #{name}"
  rescue JSON::ParserError
    File.binwrite(File.join(dir, "#{name}.json"), payload)
  end
end
puts "#{seeds.size + refused.size} payloads in #{dir}"
