package server

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3.1 description of this API (docs/api.md), served at
// /openapi.json. The tests validate every request and answer they make
// against it, so an undocumented route, status or field fails them.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the API's OpenAPI 3.1 document (JSON).
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

func (s *Server) handleOpenAPI(w http.ResponseWriter, _ *http.Request) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPI)
	return nil
}
