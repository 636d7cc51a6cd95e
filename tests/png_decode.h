// A minimal PNG reader for the browser test: 8-bit greyscale, RGB or RGBA,
// not interlaced (what Chromium's screenshots are). It checks the signature,
// joins the IDAT chunks, inflates them with zlib and undoes the per-row
// filters, giving RGB pixels. Anything else is an ada::Error naming why.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/common.h"

namespace ada::test {

struct Image {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3
};

inline uint32_t png_u32(const std::string& b, size_t at) {
  return uint32_t(uint8_t(b[at])) << 24 | uint32_t(uint8_t(b[at + 1])) << 16 | uint32_t(uint8_t(b[at + 2])) << 8 |
         uint32_t(uint8_t(b[at + 3]));
}

inline int paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

inline Image decode_png(const std::string& bytes) {
  static const char sig[] = "\x89PNG\r\n\x1a\n";
  check(bytes.size() > 33 && bytes.compare(0, 8, std::string(sig, 8)) == 0, "not a PNG file (bad signature)");
  Image img;
  int channels = 0;
  std::string idat;
  for (size_t at = 8; at + 12 <= bytes.size();) {
    const uint32_t len = png_u32(bytes, at);
    const std::string type = bytes.substr(at + 4, 4);
    check(at + 12 + len <= bytes.size(), "PNG chunk " + type + " runs past the end of the file");
    if (type == "IHDR") {
      img.width = png_u32(bytes, at + 8), img.height = png_u32(bytes, at + 12);
      const int depth = uint8_t(bytes[at + 16]), color = uint8_t(bytes[at + 17]), interlace = uint8_t(bytes[at + 20]);
      channels = color == 0 ? 1 : color == 2 ? 3 : color == 6 ? 4 : 0;
      check(depth == 8 && channels > 0 && interlace == 0,
            "PNG kind not supported here (depth " + std::to_string(depth) + ", colour type " + std::to_string(color) + ")");
    } else if (type == "IDAT") {
      idat += bytes.substr(at + 8, len);
    } else if (type == "IEND") {
      break;
    }
    at += 12 + len;
  }
  check(channels > 0 && img.width > 0 && img.height > 0, "PNG has no IHDR");
  const size_t stride = size_t(img.width) * channels;
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf raw_len = raw.size();
  check(uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) == Z_OK &&
            raw_len == raw.size(),
        "PNG image data does not inflate to " + std::to_string(raw.size()) + " bytes");
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  img.rgb.resize(size_t(img.width) * img.height * 3);
  for (uint32_t y = 0; y < img.height; y++) {
    const uint8_t* row = &raw[y * (stride + 1)];
    const int filter = row[0];
    check(filter <= 4, "PNG row filter " + std::to_string(filter) + " is not one of 0..4");
    for (size_t i = 0; i < stride; i++) {
      const int a = i >= size_t(channels) ? cur[i - channels] : 0, b = prev[i], c = i >= size_t(channels) ? prev[i - channels] : 0;
      const int pred = filter == 0 ? 0 : filter == 1 ? a : filter == 2 ? b : filter == 3 ? (a + b) / 2 : paeth(a, b, c);
      cur[i] = uint8_t(row[1 + i] + pred);
    }
    for (uint32_t x = 0; x < img.width; x++)
      for (int k = 0; k < 3; k++) img.rgb[(size_t(y) * img.width + x) * 3 + k] = cur[x * channels + (channels == 1 ? 0 : k)];
    prev.swap(cur);
  }
  return img;
}

}  // namespace ada::test
