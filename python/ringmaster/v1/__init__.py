"""The ringmaster.v1 API's messages (`*_pb2`) and gRPC stubs (`*_pb2_grpc`),
generated from proto/ by python/generate_api.sh: never edit them by hand."""
