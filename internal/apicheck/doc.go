// Package apicheck tests the API stability check, .ci/apidiff.sh, which CI
// runs (make apidiff): the exported API of the module against the previous
// commit of main (or the merge-base with it), with golang.org/x/exp's
// apidiff at the version .ci/apidiff/go.mod pins. An incompatible change
// fails the check unless CHANGELOG.md names it under "## [Unreleased]", as
// apidiff prints it without its leading "./" (runtime.WithLimits,
// gateway.Options.Keys, runtime.(*Runtime).Close).
//
// The test builds throwaway git repositories with a small module of their
// own and runs the script there, so what it proves is the check itself: a
// deliberate incompatible change fails it, an entry naming the change makes
// it pass, an added name passes, a repository with one commit passes.
package apicheck
