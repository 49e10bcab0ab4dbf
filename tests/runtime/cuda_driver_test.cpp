// The driver loader: a clear error where there is no driver, a working one where there is.
#include "runtime/cuda_driver.h"
#include "runtime/device.h"
#include "support/error.h"

#include <gtest/gtest.h>

namespace kiln::rt {
namespace {

TEST(CudaDriver, AvailabilityAgreesWithDriverAccessor) {
  std::string why;
  bool available = driver_available(&why);
  if (available) {
    EXPECT_NO_THROW(driver());
    EXPECT_GT(driver().version, 0);
    EXPECT_GT(device_count(), 0);
    return;
  }
  EXPECT_FALSE(why.empty());
  try {
    driver();
    FAIL() << "driver() must throw when driver_available() is false";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), why) << "both report the same reason";
  }
}

TEST(CudaDriver, MissingDriverNamesWhatWasSearched) {
  std::string why;
  if (driver_available(&why)) {
    EXPECT_TRUE(why.empty());
    return;  // this machine has a driver; the error path is checked where none exists
  }
  if (why.rfind("no CUDA driver found", 0) != 0)
    GTEST_SKIP() << "a driver library exists but cannot be used here: " << why;
  EXPECT_NE(why.find("libcuda.so.1"), std::string::npos) << why;
  EXPECT_NE(why.find("loader path"), std::string::npos) << why;
  EXPECT_THROW(current_device(), Error);
  EXPECT_THROW(DeviceBuffer(16), Error);
}

} // namespace
} // namespace kiln::rt
