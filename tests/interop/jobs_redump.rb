# Checks that Sidekiq 6.4.1 re-serializes the payloads reliableq stored to
# exactly the same bytes. Sidekiq matches some entries by value after
# dumping its parsed copy again (SortedEntry#reschedule's ZINCRBY on the
# schedule, retry and dead sets): a payload whose re-dump differs would
# become a second member there.
#
# usage: ruby jobs_redump.rb REDIS_URL KEY...
#
# Each KEY is a list (a queue) or a sorted set; every element is checked.
# Prints each payload that differs on stderr and exits 1 if there was any;
# prints "jobs_redump: N payloads re-dump byte for byte" and exits 0
# otherwise (N must be above 0: a key with nothing in it is an error).

require "json"
require "sidekiq"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

url, *keys = ARGV
abort("usage: jobs_redump.rb REDIS_URL KEY...") if url.nil? || keys.empty?
Sidekiq.configure_client { |config| config.redis = {url: url} }

checked = 0
failures = []
Sidekiq.redis do |conn|
  keys.each do |key|
    payloads = case conn.type(key)
               when "list" then conn.lrange(key, 0, -1)
               when "zset" then conn.zrange(key, 0, -1)
               else
                 failures << "#{key} is not a list or a sorted set"
                 []
               end
    failures << "#{key} is empty" if payloads.empty?
    payloads.each do |payload|
      checked += 1
      again = Sidekiq.dump_json(Sidekiq.load_json(payload))
      failures << "#{key}: stored\n  #{payload}\nSidekiq writes\n  #{again}" unless again == payload
    end
  end
end

if failures.empty?
  puts "jobs_redump: #{checked} payloads re-dump byte for byte"
  exit 0
end
failures.each { |failure| warn "FAILED: #{failure}" }
exit 1
