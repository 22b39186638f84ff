#include "redis/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace reliableq::redis {

namespace {

// The reason of the oldest error in the thread's OpenSSL queue, and the
// queue emptied; "" when it was empty.
std::string DrainErrorQueue() {
  unsigned long first = ERR_get_error();
  ERR_clear_error();
  if (first == 0) return "";
  const char* reason = ERR_reason_error_string(first);
  if (reason != nullptr) return reason;
  char buf[256];
  ERR_error_string_n(first, buf, sizeof buf);
  return buf;
}

// Refuses a file that cannot be opened with the reason from errno, before
// OpenSSL's less telling "no such file" or "system lib" is all there is.
Status CheckReadable(const char* what, const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "re");
  if (file == nullptr) {
    return Status::InvalidArgument(std::string("cannot read the TLS ") + what + " '" + path +
                                   "': " + std::strerror(errno));
  }
  std::fclose(file);
  return Status::OK();
}

Status Unusable(const char* what, const std::string& path) {
  std::string reason = DrainErrorQueue();
  return Status::InvalidArgument(std::string("cannot use the TLS ") + what + " '" + path + "'" +
                                 (reason.empty() ? "" : ": " + reason));
}

// OpenSSL's default for an encrypted key is to prompt on the terminal; a
// worker must fail instead.
int NoPassphrase(char*, int, int, void*) { return 0; }

// Where a session notes that the server asked for a certificate it does
// not have (ClientCertificateMissing).
int MissingCertIndex() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// Called by OpenSSL when the server asks for a client certificate and none
// is configured; the handshake goes on without one.
int NoClientCertificate(SSL* ssl, X509**, EVP_PKEY**) {
  SSL_set_ex_data(ssl, MissingCertIndex(), reinterpret_cast<void*>(1));
  return 0;
}

bool IsIpAddress(const std::string& name) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

}  // namespace

Result<std::shared_ptr<const TlsContext>> TlsContext::Create(const RedisTlsOptions& options) {
  if (options.cert_file.empty() != options.key_file.empty()) {
    return Status::InvalidArgument(
        "a TLS client certificate and its key go together: give both files or neither");
  }
  ERR_clear_error();
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (ctx == nullptr) {
    return Status::IoError("cannot set up TLS: " + DrainErrorQueue());
  }
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // Partial writes let a non-blocking writer keep what it has not sent in
  // its own buffer, which may move as it grows.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // A server that closes without close_notify (redis-server does, when it
  // drops a client) is an EOF like any other, not a protocol error.
  SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_default_passwd_cb(ctx.get(), NoPassphrase);

  if (options.ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
      return Status::IoError("cannot load the system's trusted CAs: " + DrainErrorQueue());
    }
  } else {
    Status readable = CheckReadable("CA file", options.ca_file);
    if (!readable.ok()) return readable;
    if (SSL_CTX_load_verify_locations(ctx.get(), options.ca_file.c_str(), nullptr) != 1) {
      return Unusable("CA file", options.ca_file);
    }
  }
  if (!options.cert_file.empty()) {
    Status readable = CheckReadable("certificate file", options.cert_file);
    if (!readable.ok()) return readable;
    readable = CheckReadable("key file", options.key_file);
    if (!readable.ok()) return readable;
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), options.cert_file.c_str()) != 1) {
      return Unusable("certificate file", options.cert_file);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), options.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return Unusable("key file", options.key_file);
    }
    if (SSL_CTX_check_private_key(ctx.get()) != 1) {
      ERR_clear_error();
      return Status::InvalidArgument("the TLS key file '" + options.key_file +
                                     "' does not match the certificate '" + options.cert_file +
                                     "'");
    }
  }
  if (options.cert_file.empty()) {
    MissingCertIndex();  // made here, before sessions may run on several threads
    SSL_CTX_set_client_cert_cb(ctx.get(), NoClientCertificate);
  }
  SSL_CTX_set_verify(ctx.get(), options.verify_peer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  return std::shared_ptr<const TlsContext>(new TlsContext(std::move(ctx), options));
}

Result<SslPtr> TlsContext::NewSession(int fd, const std::string& host,
                                      const std::string& where) const {
  ERR_clear_error();
  SslPtr ssl(SSL_new(ctx_.get()));
  if (ssl == nullptr || SSL_set_fd(ssl.get(), fd) != 1) {
    return Status::IoError("cannot start TLS with " + where + ": " + DrainErrorQueue());
  }
  SSL_set_connect_state(ssl.get());
  const std::string& name = options_.server_name.empty() ? host : options_.server_name;
  bool ip = IsIpAddress(name);
  if (!ip && !name.empty() && SSL_set_tlsext_host_name(ssl.get(), name.c_str()) != 1) {
    return Status::InvalidArgument("bad TLS server name '" + name + "': " + DrainErrorQueue());
  }
  if (options_.verify_peer && !name.empty()) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                 : X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
    if (set != 1) {
      return Status::InvalidArgument("bad TLS server name '" + name + "': " + DrainErrorQueue());
    }
  }
  return ssl;
}

bool ClientCertificateMissing(SSL* ssl) {
  return SSL_get_ex_data(ssl, MissingCertIndex()) != nullptr;
}

std::string TlsFailureReason(SSL* ssl, int ssl_error, int saved_errno) {
  // The verify result counts only while it can end the handshake: with
  // verification off it may hold an error that stopped nothing.
  if (ssl != nullptr && !SSL_is_init_finished(ssl) &&
      (SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER) != 0) {
    long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) {
      ERR_clear_error();
      std::string reason = X509_verify_cert_error_string(verify);
      if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
        const char* peer = SSL_get0_peername(ssl);
        X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
        char* expected = X509_VERIFY_PARAM_get1_ip_asc(param);
        std::string name = expected != nullptr ? expected
                           : X509_VERIFY_PARAM_get0_host(param, 0) != nullptr
                               ? X509_VERIFY_PARAM_get0_host(param, 0)
                               : (peer != nullptr ? peer : "");
        OPENSSL_free(expected);
        if (!name.empty()) reason += ": the certificate is not for '" + name + "'";
      }
      return "certificate verify failed (" + reason + ")";
    }
  }
  std::string queued = DrainErrorQueue();
  if (!queued.empty()) return queued;
  if (ssl_error == SSL_ERROR_SYSCALL && saved_errno != 0) return std::strerror(saved_errno);
  if (ssl_error == SSL_ERROR_SYSCALL || ssl_error == SSL_ERROR_ZERO_RETURN) {
    return "the server closed the connection";
  }
  return "error " + std::to_string(ssl_error);
}

}  // namespace reliableq::redis
