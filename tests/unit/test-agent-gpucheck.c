/* Unit tests for agent/gpucheck.c, the GPU environment preflight, against stub files (the lab
 * and CI have no GPU): host /proc/driver/nvidia/version texts, user-space driver libraries as
 * versioned files behind their sonames, device nodes as links to /dev/null (a character device
 * that opens) or missing or plain files. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/gpucheck.h"
#include "common/nvdriver.h"
#include "common/util.h"

static int nvdriver_parse_version_z(const char *text, char ret[NVDRIVER_VERSION_MAX])
{
    return nvdriver_parse_version(text, strlen(text), ret);
}

static char dir[64];
static struct gpucheck_paths paths;

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/drover-gpucheck-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(paths.lib_dirs, sizeof paths.lib_dirs, "%s/none:%s/lib", dir, dir);
    snprintf(paths.dev_dir, sizeof paths.dev_dir, "%s/dev", dir);
    return sh("mkdir -p %s/lib %s/dev && cd %s/dev && ln -s /dev/null nvidiactl && "
              "ln -s /dev/null nvidia-uvm && ln -s /dev/null nvidia0 && ln -s /dev/null nvidia1", dir, dir, dir);
}

static int teardown(void **state)
{
    (void)state;
    return fs_rm_rf(dir);
}

static void driver_libs(const char *version)
{
    assert_int_equal(sh("cd %s/lib && rm -f libnvidia-ml.so* libcuda.so* && touch libnvidia-ml.so.%s "
                        "libcuda.so.%s && ln -s libnvidia-ml.so.%s libnvidia-ml.so.1 && "
                        "ln -s libcuda.so.%s libcuda.so.1", dir, version, version, version, version), 0);
}

static void test_parse_host_version(void **state)
{
    (void)state;
    char v[GPUCHECK_VERSION_MAX] = "untouched";
    assert_int_equal(nvdriver_parse_version_z(
                         "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06  Thu Feb 20 "
                         "00:00:00 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n", v), 0);
    assert_string_equal(v, "570.124.06");
    /* the open kernel module says it differently */
    assert_int_equal(nvdriver_parse_version_z(
                         "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.51.03  "
                         "Release Build  (dvs-builder@U16-I2-C03-12-4)\n", v), 0);
    assert_string_equal(v, "575.51.03");
    strcpy(v, "untouched");
    assert_int_equal(nvdriver_parse_version_z("no driver here\n", v), -EINVAL);
    assert_int_equal(nvdriver_parse_version_z("Kernel Module  \n570.1\n", v), -EINVAL);
    assert_string_equal(v, "untouched");
}

static void test_driver_match(void **state)
{
    (void)state;
    char why[1024];
    /* no user-space driver at all */
    assert_int_equal(gpucheck_driver(&paths, "570.124.06", why, sizeof why), -EIO);
    assert_non_null(strstr(why, "no NVIDIA user-space driver in the container"));
    /* the case, in the words */
    driver_libs("575.51.02");
    char v[GPUCHECK_VERSION_MAX], path[512];
    assert_int_equal(gpucheck_lib_version(&paths, "libcuda.so.1", v, path, sizeof path), 0);
    assert_string_equal(v, "575.51.02");
    assert_int_equal(gpucheck_driver(&paths, "570.124.06", why, sizeof why), -EIO);
    assert_non_null(strstr(why, "driver mismatch: host 570.124, container 575.51"));
    assert_non_null(strstr(why, "install 570.124.06 in the container")); /* the fix */
    /* differing only in the last part: shown in full */
    assert_int_equal(gpucheck_driver(&paths, "575.51.03", why, sizeof why), -EIO);
    assert_non_null(strstr(why, "driver mismatch: host 575.51.03, container 575.51.02"));
    /* matching */
    assert_int_equal(gpucheck_driver(&paths, "575.51.02", why, sizeof why), 0);
    /* host version unknown: not a fault, but said */
    assert_int_equal(gpucheck_driver(&paths, "", why, sizeof why), 0);
    assert_non_null(strstr(why, "not checked"));
    /* libraries of two versions: a half-finished install */
    assert_int_equal(sh("cd %s/lib && rm libcuda.so.1 && touch libcuda.so.570.124.06 && "
                        "ln -s libcuda.so.570.124.06 libcuda.so.1", dir), 0);
    assert_int_equal(gpucheck_driver(&paths, "575.51.02", why, sizeof why), -EIO);
    assert_non_null(strstr(why, "disagree"));
}

static void test_cuda(void **state)
{
    (void)state;
    char why[1024], max[GPUCHECK_VERSION_MAX];
    assert_int_equal(gpucheck_cuda_for_driver("570.124.06", max), 0);
    assert_string_equal(max, "12.8");
    assert_int_equal(gpucheck_cuda_for_driver("575.51.02", max), 0);
    assert_string_equal(max, "12.9");
    assert_int_equal(gpucheck_cuda_for_driver("550.54.14", max), 0);
    assert_string_equal(max, "12.4");
    assert_int_equal(gpucheck_cuda_for_driver("550.40.07", max), 0); /* below 12.4's minimum */
    assert_string_equal(max, "12.3");
    assert_int_equal(gpucheck_cuda_for_driver("440.33", max), -ENOENT);
    driver_libs("550.54.14");
    assert_int_equal(gpucheck_cuda(&paths, "12.8", why, sizeof why), -EIO);
    assert_non_null(strstr(why, "CUDA mismatch: the release's runtime needs CUDA 12.8, the driver "
                            "550.54.14 supports CUDA 12.4 at most"));
    assert_int_equal(gpucheck_cuda(&paths, "12.4", why, sizeof why), 0);
    assert_int_equal(gpucheck_cuda(&paths, "12.10", why, sizeof why), -EIO); /* 12.10 > 12.4 */
    assert_int_equal(gpucheck_cuda(&paths, "", why, sizeof why), 0);
}

static void test_devices(void **state)
{
    (void)state;
    char why[1024];
    assert_int_equal(gpucheck_devices(&paths, "0,1", 2, why, sizeof why), 0);
    assert_int_equal(gpucheck_devices(&paths, "", 2, why, sizeof why), 0); /* 0..nproc-1 */
    assert_int_equal(gpucheck_devices(&paths, "3", 1, why, sizeof why), -EIO);
    assert_non_null(strstr(why, "/dev/nvidia3 is missing in the container"));
    assert_non_null(strstr(why, "lxc.cgroup2.devices.allow"));
    /* a plain file where the node should be (a bind mount of a missing node leaves one) */
    assert_int_equal(sh("cd %s/dev && rm nvidia1 && touch nvidia1", dir), 0);
    assert_int_equal(gpucheck_devices(&paths, "0,1", 2, why, sizeof why), -EIO);
    assert_non_null(strstr(why, "nvidia1 is not a character device"));
    assert_int_equal(sh("rm %s/dev/nvidia-uvm", dir), 0);
    assert_int_equal(gpucheck_devices(&paths, "0", 1, why, sizeof why), -EIO);
    assert_non_null(strstr(why, "nvidia-uvm is missing"));
}

static void test_memory_without_nvml(void **state)
{
    (void)state;
    char why[256];
    assert_int_equal(gpucheck_memory("0", 1, 0, why, sizeof why), 0);
    assert_non_null(strstr(why, "not checked"));
    /* no NVML on this machine: said, not a fault */
    if (access("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", F_OK) != 0) {
        assert_int_equal(gpucheck_memory("0", 1, 1ull << 30, why, sizeof why), 0);
        assert_non_null(strstr(why, "NVML not available"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_host_version),
        cmocka_unit_test_setup_teardown(test_driver_match, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuda, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices, setup, teardown),
        cmocka_unit_test(test_memory_without_nvml),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
