// A real nginx on 127.0.0.1 for the streaming tests (tests/stream_test.cc): a free port, a served
// folder, an access log that records each request's range and status. Stop/Start keep the port, so a
// test can take the server away mid-run and bring it back.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace dsc::test {

// A loopback TCP port nothing listens on now.
int FreeLoopbackPort();

class NginxServer {
 public:
  // Path of the nginx binary, or "" when it is not installed (the tests then skip, saying so).
  static std::string Binary();

  // Serves `root` (every file in it, with range support). Throws std::runtime_error when nginx does not
  // come up.
  explicit NginxServer(const std::string& root);
  ~NginxServer();
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;

  void Start();
  void Stop();
  std::string Url(const std::string& file) const;  // http://127.0.0.1:PORT/file

  // The access log's lines since the server was made: "METHOD URI RANGE STATUS BYTES".
  std::vector<std::string> Requests() const;

 private:
  void WriteConfig();
  std::string root_, dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace dsc::test
