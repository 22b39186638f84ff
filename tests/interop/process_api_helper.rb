# Shared by process_api_check.rb and process_api_sets.rb: loads Sidekiq
# 6.4.1 (the Debian ruby-sidekiq package) with its API and Web UI, reads the
# command line and counts checks (check_helper.rb).
#
# Every script is run as
#   ruby SCRIPT REDIS_URL SPEC.json STEP
# where SPEC is written by tests/interop/process_api_test.cc and STEP names
# the part of the test to run. A script prints each failed check on stderr
# and exits 1 if there was any, or prints "<script> <step>: N checks passed"
# and exits 0.

require "json"
require "sidekiq"
require "sidekiq/api"
require "sidekiq/web"
require "rack/mock"
require "rack/session/cookie"
require "securerandom"
require_relative "check_helper"

module ProcessApi
  module_function

  def start(script)
    url, spec_path, step = ARGV
    abort("usage: #{script} REDIS_URL SPEC.json STEP") unless url && spec_path && step
    Sidekiq.configure_client { |config| config.redis = {url: url} }
    @script = script
    @step = step
    Checks.check("Sidekiq is 6.4.1, not #{Sidekiq::VERSION}", Sidekiq::VERSION == "6.4.1")
    [JSON.parse(File.read(spec_path)), step]
  end

  def finish
    Checks.finish("#{@script} #{@step}")
  end

  # A time as the data contract wants it: JSON float seconds (8.x reads an
  # integer as milliseconds), after 2001.
  def float_time?(value)
    value.is_a?(Float) && value > 1.0e9
  end

  # The same for a time stored as a Redis string (the process hash's beat):
  # digits, a point and a fraction.
  def float_time_text?(text)
    text.is_a?(String) && text.match?(/\A\d{10,}\.\d+\z/) && text.to_f > 1.0e9
  end

  # Polls the block every 50 ms until it is truthy or `seconds` pass;
  # returns its last value.
  def wait_for(seconds)
    deadline = Time.now.to_f + seconds
    loop do
      value = yield
      return value if value || Time.now.to_f >= deadline
      sleep 0.05
    end
  end

  def redis(&block)
    Sidekiq.redis(&block)
  end

  # Sidekiq::Web behind the session middleware its CSRF protection needs.
  def web
    @web ||= Rack::MockRequest.new(Rack::Builder.new do
      use Rack::Session::Cookie, secret: SecureRandom.hex(64), same_site: true
      run Sidekiq::Web.new
    end)
  end

  def process_with(identity)
    Sidekiq::ProcessSet.new(false).find { |process| process.identity == identity }
  end
end
