// The etcd server, built from the go.etcd.io/etcd/server/v3 module at the pinned version: its own
// command line (etcdmain), so the harness passes ordinary etcd flags.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
