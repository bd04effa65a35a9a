// The OpenAPI 3 document of the HTTP/JSON API (/api/v1/openapi.json), made
// from the routes (http_routes.h) and the descriptors of the messages of
// proto/: a path per route, its parameters, body and reply, and a schema
// per message in protobuf's JSON mapping.
#ifndef RINGMASTER_COORDINATOR_API_OPENAPI_H_
#define RINGMASTER_COORDINATOR_API_OPENAPI_H_

#include <string>

namespace ringmaster {

// The document, in JSON.
std::string OpenApiDocument();

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_OPENAPI_H_
