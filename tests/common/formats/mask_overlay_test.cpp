// The predict outputs a person looks at: class colours, overlays on grey and
// colour inputs, and palette masks read back as class indices.
#include "common/formats/mask_overlay.h"

#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "common/base/errors.h"

namespace up {
namespace {

namespace fs = std::filesystem;

TEST(MaskOverlay, BackgroundKeepsTheInputAndClassesAreTinted) {
  PngImage grey{2, 1, 1, {100, 100}};
  const PngImage out = ColourOverlay(grey, {0, 1}, 0.5);
  ASSERT_EQ(out.channels, 3);
  EXPECT_EQ(out.pixels[0], 100);
  EXPECT_EQ(out.pixels[1], 100);
  EXPECT_EQ(out.pixels[2], 100);
  const auto c = ClassColour(1);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(out.pixels[3 + k], std::lround(0.5 * 100 + 0.5 * c[k]));
}

TEST(MaskOverlay, FourChannelInputUsesItsFirstThreeAsRgb) {
  PngImage rgba{1, 1, 4, {10, 20, 30, 255}};
  const PngImage out = ColourOverlay(rgba, {0});
  EXPECT_EQ(out.pixels, (std::vector<uint8_t>{10, 20, 30}));
}

TEST(MaskOverlay, ClassesHaveDistinctColours) {
  for (int a = 1; a < 8; ++a)
    for (int b = a + 1; b < 8; ++b) EXPECT_NE(ClassColour(a), ClassColour(b)) << a << " " << b;
}

TEST(MaskOverlay, MaskOfTheWrongSizeIsRefused) {
  PngImage grey{2, 2, 1, {0, 0, 0, 0}};
  EXPECT_THROW(ColourOverlay(grey, {0, 1}), RuntimeError);
}

// A 2x1 palette PNG with indices {2, 1}, written with libpng directly.
void WritePalettePng(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_init_io(png, f);
  png_set_IHDR(png, info, 2, 1, 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_color palette[3] = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}};
  png_set_PLTE(png, info, palette, 3);
  png_write_info(png, info);
  png_byte row[2] = {2, 1};
  png_write_row(png, row);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

TEST(PngPaletteMasks, IndicesOrColours) {
  const std::string path =
      (fs::temp_directory_path() / ("up-palette-" + std::to_string(getpid()) + ".png")).string();
  WritePalettePng(path);
  const PngImage indices = ReadPng(path, PngPalette::kIndices);
  EXPECT_EQ(indices.channels, 1);
  EXPECT_EQ(indices.pixels, (std::vector<uint8_t>{2, 1}));
  const PngImage colours = ReadPng(path);
  EXPECT_EQ(colours.channels, 3);
  EXPECT_EQ(colours.pixels, (std::vector<uint8_t>{0, 255, 0, 255, 0, 0}));
  const PngImage header = ReadPngHeader(path, PngPalette::kIndices);
  EXPECT_EQ(header.width, 2);
  EXPECT_EQ(header.height, 1);
  EXPECT_EQ(header.channels, 1);
  EXPECT_TRUE(header.pixels.empty());
  fs::remove(path);
}

}  // namespace
}  // namespace up
