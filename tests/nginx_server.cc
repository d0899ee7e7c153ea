#include "tests/nginx_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/test_util.h"

namespace dsc::test {

namespace {

int FreePortImpl() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(s);
    throw std::runtime_error("no free loopback port");
  }
  ::close(s);
  return ntohs(a.sin_port);
}

bool Accepts(int port) {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  const bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

}  // namespace

int FreeLoopbackPort() { return FreePortImpl(); }

std::string NginxServer::Binary() {
  for (const char* p : {"/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

NginxServer::NginxServer(const std::string& root) : root_(root) {
  dir_ = ScratchDir("nginx");
  // The free port found may be taken by another test before nginx binds it: then another port.
  for (int attempt = 1;; ++attempt) {
    port_ = FreeLoopbackPort();
    WriteConfig();
    try {
      Start();
      return;
    } catch (const std::runtime_error&) {
      if (attempt == 5) throw;
    }
  }
}

void NginxServer::WriteConfig() {
  std::ofstream c(dir_ + "/nginx.conf");
  c << "daemon off;\nmaster_process on;\nworker_processes 1;\n";
  if (::getuid() == 0) c << "user root;\n";  // the served build tree need not be world-readable
  c << "pid " << dir_ << "/nginx.pid;\nerror_log " << dir_ << "/error.log warn;\n"
    << "events { worker_connections 256; }\n"
    << "http {\n"
    << "  log_format ranges '$request_method $uri $http_range $status $body_bytes_sent';\n"
    << "  access_log " << dir_ << "/access.log ranges;\n";
  for (const char* t : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"}) c << "  " << t << "_temp_path " << dir_ << "/" << t << ";\n";
  c << "  keepalive_requests 100000;\n"
    << "  default_type application/octet-stream;\n"
    << "  server {\n    listen 127.0.0.1:" << port_ << ";\n    root " << root_ << ";\n    location / { }\n  }\n}\n";
}

NginxServer::~NginxServer() { Stop(); }

void NginxServer::Start() {
  if (pid_ > 0) return;
  const std::string bin = Binary();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::execl(bin.c_str(), bin.c_str(), "-e", (dir_ + "/error.log").c_str(), "-p", dir_.c_str(), "-c", (dir_ + "/nginx.conf").c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 500; ++i) {
    if (Accepts(port_)) return;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      std::ifstream log(dir_ + "/error.log");
      std::stringstream ss;
      ss << log.rdbuf();
      throw std::runtime_error("nginx exited at start: " + ss.str());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Stop();
  throw std::runtime_error("nginx did not accept connections within 5 s");
}

void NginxServer::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);  // fast shutdown: open connections are closed mid-transfer
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  for (int i = 0; i < 200 && Accepts(port_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

std::string NginxServer::Url(const std::string& file) const { return "http://127.0.0.1:" + std::to_string(port_) + "/" + file; }

std::vector<std::string> NginxServer::Requests() const {
  std::ifstream in(dir_ + "/access.log");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) lines.push_back(l);
  return lines;
}

}  // namespace dsc::test
