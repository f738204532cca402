package api

import _ "embed"

// OpenAPI is the OpenAPI 3 document of /v1, served at GET /v1/openapi.json
// for tools in other languages. A daemon test checks every route against it.
//
//go:embed openapi.json
var OpenAPI []byte
