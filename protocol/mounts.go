package protocol

import "time"

// MountKind is the provider of a mount's objects.
type MountKind string

// The mount kinds. boxStorage and providerNative are named by the
// contract and not served: capabilities.mounts says false for them, and a
// mount of either is InvalidParams.
const (
	MountS3             MountKind = "s3"             // AWS S3 or an S3-compatible store: s3://bucket/prefix
	MountR2             MountKind = "r2"             // Cloudflare R2: r2://bucket/prefix, endpoint required
	MountGCS            MountKind = "gcs"            // Google Cloud Storage: gs://bucket/prefix
	MountAzureBlob      MountKind = "azureBlob"      // Azure Blob Storage: az://container/prefix
	MountBoxStorage     MountKind = "boxStorage"     // not served
	MountProviderNative MountKind = "providerNative" // not served
)

// MountsCapability says, for each kind, whether this server mounts it
// (capabilities.mounts): true only where a client of the provider is
// built in and mounts can be bound for commands (a mount namespace).
type MountsCapability struct {
	S3             bool `json:"s3"`
	GCS            bool `json:"gcs"`
	R2             bool `json:"r2"`
	AzureBlob      bool `json:"azureBlob"`
	BoxStorage     bool `json:"boxStorage"`
	ProviderNative bool `json:"providerNative"`
}

// Mount shows the objects under a bucket's prefix to confined commands as
// files at Path, as the bucket was when each command started. The
// server's --mount gives mounts; initializationOptions.mounts replaces
// them only under --client-mounts.
type Mount struct {
	// Name names the mount: unique in the session; syncMount takes it.
	Name string `json:"name"`
	// Path is where commands see the objects: absolute, inside the root
	// or outside it, over none of the root's own files and no other
	// mount.
	Path string `json:"path"`
	// ReadOnly mounts are written by nothing; a writable mount's changes
	// are written back when each command ends and on syncMount.
	ReadOnly bool `json:"readOnly"`
	// Intent says where the objects are.
	Intent MountIntent `json:"intent"`
}

// MountIntent says where a mount's objects are.
type MountIntent struct {
	// Kind is the provider; it must match URI's scheme.
	Kind MountKind `json:"kind"`
	// URI is s3://bucket/prefix, r2://bucket/prefix, gs://bucket/prefix
	// or az://container/prefix. The prefix is a folder: s3://b/data shows
	// data/…, never data-old/….
	URI string `json:"uri"`
	// Credentials name the secret the server signs with; absent, requests
	// go unsigned (a public bucket, an emulator).
	Credentials *MountCredentials `json:"credentials,omitempty"`
}

// MountCredentials name a secret, never give it: the server resolves ID
// from --secrets FILE or the variable TOOLHOST_SECRET_<ID>.
type MountCredentials struct {
	ID string `json:"id"`
}

// Manifest shows paths of the machine that runs the commands to them
// (initializationOptions.manifest).
type Manifest struct {
	Entries []ManifestEntry `json:"entries"`
}

// ManifestEntry shows Source at Target to commands, read-only unless
// Writable. Source must lie inside the root or a read root (a writable
// entry inside the root), so that a client shows nothing it could not
// read; Target is absolute and, like a mount's path, over none of the
// root's own files.
type ManifestEntry struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	Writable bool   `json:"writable,omitempty"`
}

// MountOutcome is what a write-back of a writable mount did: in a
// ToolResult's mounts (the write-back when the command ended) and as the
// result of syncMount.
type MountOutcome struct {
	// Name is the mount's.
	Name string `json:"name"`
	// Uploaded and Deleted count the objects written and removed.
	Uploaded int `json:"uploaded"`
	Deleted  int `json:"deleted"`
	// Conflicts are the paths, relative to the mount, whose object
	// changed in the bucket since it was read: the bucket's object stays,
	// the local copy is kept, and nothing is written for it.
	Conflicts []string `json:"conflicts"`
	// NotUploaded are the local files an object store cannot hold (a
	// symlink, a special file, an empty directory), left as they are.
	NotUploaded []MountRefusal `json:"notUploaded,omitempty"`
	// Error is why the write-back stopped, with the provider's words;
	// what it names was not written. Absent when it finished.
	Error string `json:"error,omitempty"`
}

// MountRefusal is a local path a write-back left alone, and why.
type MountRefusal struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// MountsParams are the params of mounts: an empty object.
type MountsParams struct{}

// MountState is a mount as mounts lists it.
type MountState struct {
	Mount
	// Fetched says the objects were fetched at least once this session.
	Fetched bool `json:"fetched"`
	// Objects and Bytes are what the last fetch showed.
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// FetchedAt is when the bucket was last listed; SyncedAt when a
	// write-back last finished.
	FetchedAt *time.Time `json:"fetchedAt,omitempty"`
	SyncedAt  *time.Time `json:"syncedAt,omitempty"`
	// Skipped are the object keys that cannot be files ("a/../b", a key
	// that is also a folder): not shown, never deleted.
	Skipped []string `json:"skipped,omitempty"`
	// Error is why the last fetch or write-back failed, with the
	// provider's words.
	Error string `json:"error,omitempty"`
}

// MountList is the result of mounts.
type MountList []MountState

// SyncMountParams are the params of syncMount.
type SyncMountParams struct {
	// Name is the mount's.
	Name string `json:"name"`
}
