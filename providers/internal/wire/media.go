package wire

import "strings"

// MIMEType is a media part's MIME type as every format sends it (OpenAI
// data URLs, Anthropic media_type, Gemini inlineData and fileData
// mimeType): trimmed and lower-cased. Media types are case-insensitive
// (RFC 2045) but providers match them exactly, so "IMAGE/PNG" is sent as
// "image/png". Already canonical input is returned without allocating.
func MIMEType(s string) string {
	return strings.ToLower(strings.TrimSpace(s))
}
