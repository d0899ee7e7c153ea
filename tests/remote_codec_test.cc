// The hand codec of ProcessReply (remote/codec.h) against protobuf's own, both ways: what the worker
// writes is the message worker.proto describes, and the loader reads any protobuf encoding of it,
// however the bytes are split between receive buffers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "remote/codec.h"
#include "remote/worker.pb.h"

namespace dsc::remote {
namespace {

std::string Gather(const std::vector<BytePiece>& pieces) {
  std::string out;
  for (const BytePiece& p : pieces) out.append(reinterpret_cast<const char*>(p.data), p.size);
  return out;
}

// `bytes` cut into pieces of `step` bytes.
std::vector<BytePiece> Split(const std::string& bytes, size_t step) {
  std::vector<BytePiece> out;
  for (size_t at = 0; at < bytes.size(); at += step)
    out.push_back({reinterpret_cast<const uint8_t*>(bytes.data()) + at, std::min(step, bytes.size() - at)});
  return out;
}

TEST(RemoteCodec, TheWorkersRepliesAreProtobufs) {
  const std::string params(2 * 52, '\x07'), forms = {'\x01', '\x05'}, images(300, '\x80');
  for (bool compressed : {false, true}) {
    for (bool with_forms : {false, true}) {
      const std::string head =
          EncodeReplyHead(compressed, 4096, reinterpret_cast<const uint8_t*>(params.data()), params.size(),
                          with_forms ? reinterpret_cast<const uint8_t*>(forms.data()) : nullptr, forms.size(), images.size());
      ProcessReply r;
      ASSERT_TRUE(r.ParseFromString(head + images));
      EXPECT_EQ(r.compressed(), compressed);
      EXPECT_EQ(r.images_size(), 4096u);
      EXPECT_EQ(r.params(), params);
      EXPECT_EQ(r.forms(), with_forms ? forms : "");
      EXPECT_EQ(r.images(), images);
      EXPECT_EQ(r.sample_error(), "");
      // protobuf's serialiser writes the same bytes: fields in number order, images last.
      EXPECT_EQ(r.SerializeAsString(), head + images);
    }
  }
  ProcessReply e;
  ASSERT_TRUE(e.ParseFromString(EncodeSampleErrorReply("sample 3: not a JPEG")));
  EXPECT_EQ(e.sample_error(), "sample 3: not a JPEG");
}

TEST(RemoteCodec, ReadsAnyProtobufEncodingWhereItLies) {
  ProcessReply r;
  r.set_compressed(true);
  r.set_images_size(123456);
  r.set_params(std::string(3 * 52, '\x11'));
  r.set_forms("\x01\x02\x03");
  r.set_images(std::string(1000, '\x42'));
  std::string bytes = r.SerializeAsString();
  // Fields the parser does not know, of every wire type, are skipped; a repeated field keeps its last.
  bytes += std::string("\x38\x05", 2);                           // 7: varint
  bytes += std::string("\x41", 1) + std::string(8, '\x01');      // 8: fixed64
  bytes += std::string("\x4d", 1) + std::string(4, '\x02');      // 9: fixed32
  bytes += std::string("\x52\x03xyz", 5);                        // 10: bytes
  bytes += std::string("\x10\xc0\xc4\x07", 4);                 // images_size again: 123456
  for (size_t step : {size_t(1), size_t(3), size_t(64), bytes.size()}) {
    const std::vector<BytePiece> pieces = Split(bytes, step);
    ReplyView v;
    ASSERT_EQ(ParseReply(pieces.data(), pieces.size(), &v), "") << step;
    EXPECT_TRUE(v.compressed);
    EXPECT_EQ(v.images_size, 123456u);
    EXPECT_TRUE(v.params.present && v.forms.present && v.images.present);
    EXPECT_EQ(Gather(v.params.pieces), r.params());
    EXPECT_EQ(v.params.size, r.params().size());
    EXPECT_EQ(Gather(v.forms.pieces), r.forms());
    EXPECT_EQ(Gather(v.images.pieces), r.images());
    EXPECT_EQ(v.images.size, r.images().size());
    std::string copied(r.images().size(), '\0');
    CopyPieces(v.images.pieces, reinterpret_cast<uint8_t*>(copied.data()));
    EXPECT_EQ(copied, r.images());
  }
  ProcessReply e;
  e.set_sample_error("sample 9: truncated JPEG");
  const std::string eb = e.SerializeAsString();
  const std::vector<BytePiece> pieces = Split(eb, 5);
  ReplyView v;
  ASSERT_EQ(ParseReply(pieces.data(), pieces.size(), &v), "");
  EXPECT_EQ(v.sample_error, "sample 9: truncated JPEG");
  EXPECT_FALSE(v.params.present || v.forms.present || v.images.present);
}

// Every cut of a reply short of its end inside a field is named, whatever the pieces.
TEST(RemoteCodec, TruncatedRepliesAreRefused) {
  ProcessReply r;
  r.set_images_size(8);
  r.set_sample_error("x");
  r.set_params(std::string(52, '\x01'));
  r.set_forms(std::string(1, '\0'));
  r.set_images(std::string(8, '\x02'));
  const std::string bytes = r.SerializeAsString();
  size_t refused = 0;
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    const std::string part = bytes.substr(0, cut);
    ReplyView v;
    const std::vector<BytePiece> pieces = Split(part, 2);
    if (!ParseReply(pieces.data(), pieces.size(), &v).empty()) ++refused;
  }
  // Only the cuts between whole fields parse: after images_size, sample_error, params and forms.
  EXPECT_EQ(refused, bytes.size() - 1 - 4);
  const std::string params_cut = bytes.substr(0, bytes.find(std::string(52, '\x01')) + 10);
  const BytePiece one{reinterpret_cast<const uint8_t*>(params_cut.data()), params_cut.size()};
  ReplyView v;
  EXPECT_EQ(ParseReply(&one, 1, &v), "truncated params");
  const std::string long_error = std::string("\x1a\x81\x80\x04", 4) + std::string(65537, 'e');  // 65537 bytes
  const BytePiece le{reinterpret_cast<const uint8_t*>(long_error.data()), long_error.size()};
  EXPECT_EQ(ParseReply(&le, 1, &v), "error message too long");
  const std::string group("\x1b", 1);  // a start-group key: not a type any reply field has
  const BytePiece g{reinterpret_cast<const uint8_t*>(group.data()), group.size()};
  EXPECT_EQ(ParseReply(&g, 1, &v), "unexpected wire type");
}

}  // namespace
}  // namespace dsc::remote
