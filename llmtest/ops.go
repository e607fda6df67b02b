package llmtest

import "net/http"

// opHandler returns the handler of a non-chat operation (embeddings,
// speech, transcription, token counting, model listing), or nil for chat
// paths, which route() serves.
func (s *Server) opHandler(r *http.Request) func(w http.ResponseWriter, r *http.Request, body []byte) {
	return nil
}
