// Package parentwatch makes a control-plane process exit when the program that
// started it goes away, so that no etcd or kube-apiserver outlives a test binary
// that crashed or was killed before it could stop them.
//
// The parent (kinformer-testenv) sets KINFORMER_EXIT_WITH_PARENT=1 and keeps the
// write end of the child's stdin open. When the parent dies, for any reason, the
// kernel closes that pipe and the read below returns: the child exits at once.
package parentwatch

import (
	"io"
	"os"
)

// Start begins watching stdin when KINFORMER_EXIT_WITH_PARENT is set; otherwise it
// does nothing, so the binaries also run by hand as usual.
func Start() {
	if os.Getenv("KINFORMER_EXIT_WITH_PARENT") == "" {
		return
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
}
