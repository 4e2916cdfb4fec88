// Command etcd is etcd's own server entry point, built from go.etcd.io/etcd/server/v3 so that the
// release is pinned by this module's go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
