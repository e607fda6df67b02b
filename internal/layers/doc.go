// Package layers holds no code: its test checks the module's import graph
// against the layers drawn in the README (imports point down only) and that
// no Proto.Actor or RxGo type shows in the exported API of the packages
// that promise not to show one.
package layers
