package cmd

import (
	"fmt"
	"path/filepath"

	"github.com/toolhost/toolhost/mounts"
	"github.com/toolhost/toolhost/objstore"
	"github.com/toolhost/toolhost/persist"
	"github.com/toolhost/toolhost/tools"
)

// storeKinds are the mount kinds openStore serves: none until the
// providers' clients are in.
var storeKinds []string

// openStore makes the client of a bucket of kind: the one place that
// knows every provider's package.
func openStore(kind, bucket string, creds objstore.Credentials) (objstore.Store, error) {
	return nil, fmt.Errorf("%w: %s", mounts.ErrUnsupported, kind)
}

// mountsConfig is the sessions' mounts: --mount, --client-mounts, the
// secrets of --secrets and TOOLHOST_SECRET_<ID> in the server's
// environment, and the caches under STATE/mounts.
func (cl *commandLine) mountsConfig() tools.MountsConfig {
	env := cl.sandbox.Env
	secrets := cl.secrets
	stateDir := cl.stateDir
	return tools.MountsConfig{
		Specs:        cl.mounts,
		ClientMounts: cl.clientMounts,
		Credentials: func(id string) (objstore.Credentials, error) {
			return secrets.Lookup(id, func(k string) string { return lookupEnv(env, k) })
		},
		Open:   openStore,
		Kinds:  storeKinds,
		Limits: mounts.Limits{MaxBytes: int64(cl.mountMaxBytes)},
		Dir: func() (string, error) {
			d, err := persist.ResolveDirs(stateDir)
			if err != nil {
				return "", err
			}
			return filepath.Join(d.State, "mounts"), nil
		},
	}
}
