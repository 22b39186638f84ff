// TlsContext: the client side of TLS for Transport, built once per
// connection object from RedisTlsOptions and shared by its reconnects.
//
// What it sets up: TLS 1.2 at least; the CA file, or the system's default
// verify paths when none is given; the client certificate and key when
// given; peer verification unless verify_peer is false. Each session then
// checks the certificate's name against tls.server_name, or the host when
// that is empty (an IP address is checked against the IP SANs), and sends
// that name as SNI unless it is an IP address (RFC 6066 forbids those).
//
// Messages name the files they could not use, never their content; no key
// material or password goes into any message.
//
// Thread safety: a built TlsContext is read-only and may be shared between
// threads (OpenSSL's SSL_CTX is safe for concurrent SSL_new).

#ifndef RELIABLEQ_REDIS_TLS_H_
#define RELIABLEQ_REDIS_TLS_H_

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::redis {

struct SslCtxDeleter {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
struct SslDeleter {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxDeleter>;
using SslPtr = std::unique_ptr<SSL, SslDeleter>;

class TlsContext {
 public:
  // Loads the files `options` names. kInvalidArgument naming the file when
  // one is missing, unreadable, not PEM, encrypted, or when the key does
  // not match the certificate; also when only one of cert_file and
  // key_file is given.
  static Result<std::shared_ptr<const TlsContext>> Create(const RedisTlsOptions& options);

  // A client session on the connected socket `fd` for a server reached as
  // `host`, with SNI and the name check set up. `where` is for messages.
  Result<SslPtr> NewSession(int fd, const std::string& host, const std::string& where) const;

  const RedisTlsOptions& options() const { return options_; }

 private:
  TlsContext(SslCtxPtr ctx, RedisTlsOptions options)
      : ctx_(std::move(ctx)), options_(std::move(options)) {}

  SslCtxPtr ctx_;
  RedisTlsOptions options_;
};

// True when the server asked `ssl` for a client certificate and none was
// configured: a reset or EOF right after the handshake then most likely
// means the server refused to go on without one (with TLS 1.3 the client
// learns that only when it next reads, if the alert was not lost to a
// reset).
bool ClientCertificateMissing(SSL* ssl);

// Why an SSL call on `ssl` failed, in words, from SSL_get_error's
// `ssl_error`, the session's verify result, the thread's OpenSSL error
// queue (which this empties) and `saved_errno`: "certificate verify failed
// (unable to get local issuer certificate)", "tlsv13 alert certificate
// required", "Connection reset by peer"...
std::string TlsFailureReason(SSL* ssl, int ssl_error, int saved_errno);

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_TLS_H_
