// The registry of distribution's cmd/registry, with the storage drivers a node's registry can use
// (filesystem, inmemory) and not the cloud ones (azure, gcs, s3-aws, the cloudfront middleware):
// their SDKs were most of the registry's build time, and a node here is offline. Everything else
// is as upstream's main imports it. scripts/build-test-binaries.sh builds it against the pinned
// distribution module.
package main

import (
	_ "net/http/pprof"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/auth/silly"
	_ "github.com/distribution/distribution/v3/registry/auth/token"
	_ "github.com/distribution/distribution/v3/registry/proxy"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/middleware/redirect"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/middleware/rewrite"
)

func main() {
	// As upstream's main: RootCmd reports its own errors and exits non-zero.
	_ = registry.RootCmd.Execute()
}
