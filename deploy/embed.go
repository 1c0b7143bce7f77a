// Package deploy ships the manifests svcproxy runs on when given no cluster: the
// seed example that `svcproxy render` and `make demo` use by default.
package deploy

import "embed"

// Examples holds examples/*.yaml.
//
//go:embed examples/*.yaml
var Examples embed.FS
