"""C++ protobuf and gRPC code from .proto files, by Debian's protoc and
grpc_cpp_plugin (Bazel 4.2.3 has no offline proto toolchain)."""

def cc_grpc_proto_library(name, protos, testonly = False, visibility = None):
    """protos: .proto files of this package, all compiled with -I<workspace root>."""
    stems = [p[:-len(".proto")] for p in protos]
    hdrs = [s + ext for s in stems for ext in [".pb.h", ".grpc.pb.h"]]
    srcs = [s + ext for s in stems for ext in [".pb.cc", ".grpc.pb.cc"]]
    native.genrule(
        name = name + "_gen",
        testonly = testonly,
        srcs = protos,
        outs = hdrs + srcs,
        cmd = "protoc -I. --cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
              "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) $(SRCS)",
    )
    native.cc_library(
        name = name,
        testonly = testonly,
        srcs = srcs,
        hdrs = hdrs,
        visibility = visibility,
        deps = ["//third_party:grpc"],
    )
