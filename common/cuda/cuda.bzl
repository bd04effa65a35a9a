"""nvcc as a Bazel genrule: one .cu file to one relocatable object."""

# sm_80 (A100), sm_90 (H100) and PTX for newer parts.
NVCC_ARCHS = "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"

def cuda_object(name, src, hdrs = []):
    native.genrule(
        name = name,
        srcs = [src] + hdrs,
        outs = [name + ".cu.o"],
        cmd = ("/usr/local/cuda/bin/nvcc -std=c++17 -O3 -Xcompiler -fPIC " +
               NVCC_ARCHS + " -I. -c $(location " + src + ") -o $@"),
        tags = ["manual"],
    )
