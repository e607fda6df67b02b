// Package sdktest drives the gateway with the official Go SDKs (openai-go,
// anthropic-sdk-go, google.golang.org/genai). It is a module of its own, so
// that the root go.mod never requires them; make sdk-go runs it.
package sdktest
