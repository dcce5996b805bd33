package cmd

import (
	"fmt"
	"path/filepath"

	"github.com/toolhost/toolhost/mounts"
	"github.com/toolhost/toolhost/objstore"
	"github.com/toolhost/toolhost/objstore/azblob"
	"github.com/toolhost/toolhost/objstore/gcs"
	"github.com/toolhost/toolhost/objstore/s3"
	"github.com/toolhost/toolhost/persist"
	"github.com/toolhost/toolhost/tools"
)

// storeKinds are the mount kinds openStore serves.
var storeKinds = []string{mounts.KindS3, mounts.KindR2, mounts.KindGCS, mounts.KindAzureBlob}

// openStore makes the client of a bucket of kind: the one place that
// knows every provider's package.
func openStore(kind, bucket string, creds objstore.Credentials) (objstore.Store, error) {
	switch kind {
	case mounts.KindS3, mounts.KindR2:
		return s3.New(bucket, creds, s3.Options{Kind: kind})
	case mounts.KindGCS:
		return gcs.New(bucket, creds, gcs.Options{})
	case mounts.KindAzureBlob:
		return azblob.New(bucket, creds, azblob.Options{})
	}
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
