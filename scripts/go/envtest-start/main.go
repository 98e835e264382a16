// envtest-start: controller-runtime's envtest control plane (etcd and kube-apiserver from
// KUBEBUILDER_ASSETS), started and stopped once, as a suite's BeforeSuite and AfterSuite do. Prints the
// seconds Start took (until envtest says the API server is ready), for scripts/envtest-suites.sh, which
// sets it beside `kubeunit start` of the envtest profile on the same binaries.
package main

import (
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

func main() {
	env := &envtest.Environment{}
	began := time.Now()
	if _, err := env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "envtest start:", err)
		os.Exit(1)
	}
	took := time.Since(began)
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "envtest stop:", err)
		os.Exit(1)
	}
	fmt.Printf("%.3f\n", took.Seconds())
}
