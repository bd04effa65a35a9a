"""libFuzzer targets that also run their corpus as a regular test."""

def ringmaster_fuzzer(name, srcs, deps):
    """A fuzz target (LLVMFuzzerTestOneInput in `srcs`), three ways.

    <name>_lib: the target; <name>_corpus_test: every file of corpus/<name>
    through it once, in any build; <name>: the libFuzzer binary, built only
    with --config=fuzz (clang), so tagged manual (and fuzz, which the CUDA
    build leaves out).
    """
    native.cc_library(
        name = name + "_lib",
        testonly = True,
        srcs = srcs + ["require.h"],
        deps = deps,
        alwayslink = True,
    )
    native.cc_test(
        name = name + "_corpus_test",
        srcs = ["corpus_main.cc"],
        args = ["tests/fuzz/corpus/" + name],
        data = native.glob(["corpus/" + name + "/**"]),
        deps = [":" + name + "_lib"],
    )
    native.cc_binary(
        name = name,
        testonly = True,
        linkopts = ["-fsanitize=fuzzer"],
        tags = [
            "fuzz",
            "manual",
        ],
        deps = [":" + name + "_lib"],
    )
