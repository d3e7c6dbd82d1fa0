/* tests/unit/test-trainer-cuda.c: the parts of the CUDA backend that run without a GPU (CI has
 * none): the MFU FLOPs count, the peak-FLOPs override, argument checks that must fail before any
 * device call, DROVER_STEP's parsing, and destroy(NULL).  Kernels are tested on a GPU by tests/gpu (make gpu-test).
 * Built without nvcc, it checks that the backend is absent instead. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "common/log.h"
#include "trainer/backend.h"
#include "trainer/cuda_backend.h"
#include "trainer/model.h"

#ifdef DROVER_HAVE_CUDA
static void test_flops_gpt2(void **state)
{
    (void)state;
    struct gpt_config c = {.layers = 12, .heads = 12, .dim = 768, .vocab = 50257, .seq = 1024};
    double f = gpt_flops_per_token(&c, 1024);
    /* 6 * 124,475,904 + 6 * 12 * 1024 * 768 */
    assert_true(fabs(f - (6.0 * 124475904.0 + 6.0 * 12 * 1024 * 768)) < 1.0);
    struct gpt_config bad = {.layers = 0, .heads = 12, .dim = 768, .vocab = 50257, .seq = 1024};
    assert_true(gpt_flops_per_token(&bad, 1024) == 0.0);
}

static void test_peak_override(void **state)
{
    (void)state;
    unsetenv("DROVER_PEAK_TFLOPS");
    assert_true(fabs(cuda_peak_flops() - 989.5e12) < 1e6);
    setenv("DROVER_PEAK_TFLOPS", "790", 1);
    assert_true(fabs(cuda_peak_flops() - 790e12) < 1e6);
    setenv("DROVER_PEAK_TFLOPS", "nonsense", 1);
    assert_true(fabs(cuda_peak_flops() - 989.5e12) < 1e6);
    setenv("DROVER_PEAK_TFLOPS", "-5", 1);
    assert_true(fabs(cuda_peak_flops() - 989.5e12) < 1e6);
    unsetenv("DROVER_PEAK_TFLOPS");
}

/* Shapes the kernels cannot run are refused before the device is touched; ret_be untouched. */
static void test_create_rejects(void **state)
{
    (void)state;
    void *be = (void *)0x1;
    struct backend_opts o = {.batch = 2, .seq = 16, .threads = 1, .rank = 0, .world_size = 1};
    struct gpt_config hs24 = {.layers = 1, .heads = 2, .dim = 48, .vocab = 64, .seq = 16};
    assert_int_equal(backend_cuda.create(&hs24, &o, &be), -EINVAL); /* head size 24 */
    struct gpt_config odd = {.layers = 1, .heads = 1, .dim = 20, .vocab = 64, .seq = 16};
    assert_int_equal(backend_cuda.create(&odd, &o, &be), -EINVAL); /* width not a multiple of 8 */
    struct gpt_config ok = {.layers = 1, .heads = 1, .dim = 64, .vocab = 64, .seq = 16};
    struct backend_opts badb = o;
    badb.batch = 0;
    assert_int_equal(backend_cuda.create(&ok, &badb, &be), -EINVAL);
    struct backend_opts longseq = o;
    longseq.seq = 32; /* longer than the model's */
    assert_int_equal(backend_cuda.create(&ok, &longseq, &be), -EINVAL);
    struct backend_opts badrank = o;
    badrank.rank = 1; /* >= world size */
    assert_int_equal(backend_cuda.create(&ok, &badrank, &be), -EINVAL);
    assert_ptr_equal(be, (void *)0x1);
    backend_cuda.destroy(NULL);
    assert_ptr_equal(backend_find("cuda"), &backend_cuda);
}
/* DROVER_STEP: the three names, the default for unset or empty, anything else refused with
 * ret_ untouched; a backend is refused before the device is touched */
static void test_step_mode(void **state)
{
    (void)state;
    enum cuda_step_mode m = CUDA_STEP_GRAPH;
    assert_int_equal(cuda_step_mode_parse(NULL, &m), 0);
    assert_int_equal(m, CUDA_STEP_DEFAULT);
    m = CUDA_STEP_GRAPH;
    assert_int_equal(cuda_step_mode_parse("", &m), 0);
    assert_int_equal(m, CUDA_STEP_DEFAULT);
    const char *names[] = {"plain", "staged", "graph"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cuda_step_mode_parse(names[i], &m), 0);
        assert_int_equal(m, (enum cuda_step_mode)i);
        assert_string_equal(cuda_step_mode_name(m), names[i]);
    }
    m = CUDA_STEP_STAGED;
    assert_int_equal(cuda_step_mode_parse("Graph", &m), -EINVAL);
    assert_int_equal(cuda_step_mode_parse("graph ", &m), -EINVAL);
    assert_int_equal(cuda_step_mode_parse("1", &m), -EINVAL);
    assert_int_equal(m, CUDA_STEP_STAGED);
    assert_string_equal(cuda_step_mode_name((enum cuda_step_mode)7), "?");
    /* the environment is read by create(), before any device call (none here) */
    void *be = (void *)0x1;
    struct backend_opts o = {.batch = 2, .seq = 16, .threads = 1, .rank = 0, .world_size = 1};
    struct gpt_config ok = {.layers = 1, .heads = 1, .dim = 64, .vocab = 64, .seq = 16};
    setenv("DROVER_STEP", "graphs", 1);
    assert_int_equal(backend_cuda.create(&ok, &o, &be), -EINVAL);
    assert_ptr_equal(be, (void *)0x1);
    unsetenv("DROVER_STEP");
    /* so is every other implementation switch (kernels/knobs.h) */
    setenv("DROVER_CLS", "v3", 1);
    assert_int_equal(backend_cuda.create(&ok, &o, &be), -EINVAL);
    assert_ptr_equal(be, (void *)0x1);
    unsetenv("DROVER_CLS");
    setenv("DROVER_WG_VARIANT", "77;96;96", 1);
    assert_int_equal(backend_cuda.create(&ok, &o, &be), -EINVAL);
    assert_ptr_equal(be, (void *)0x1);
    unsetenv("DROVER_WG_VARIANT");
}
#else
static void test_not_built(void **state)
{
    (void)state;
    assert_null(backend_find("cuda"));
}
#endif

int main(void)
{
    log_set_level(LOG_LVL_ERR);
    const struct CMUnitTest tests[] = {
#ifdef DROVER_HAVE_CUDA
        cmocka_unit_test(test_flops_gpt2),
        cmocka_unit_test(test_peak_override),
        cmocka_unit_test(test_create_rejects),
        cmocka_unit_test(test_step_mode),
#else
        cmocka_unit_test(test_not_built),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
