// Package k8s holds regressd's Kubernetes manifests; its test decodes every
// one strictly against the Kubernetes API types and checks what a cluster
// would only find out at run time.
package k8s

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

var roles = []string{"scheduler", "producer", "worker", "writer", "gateway"}

// manifests are every object of every *.yaml file here, by file.
type manifests struct {
	deployments  []*appsv1.Deployment
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	configMaps   []*corev1.ConfigMap
	pdbs         []*policyv1.PodDisruptionBudget
	hpas         []*autoscalingv2.HorizontalPodAutoscaler
}

// load decodes every document strictly: an unknown or duplicated field, a
// wrong type or a kind outside the scheme fails.
func load(t *testing.T) manifests {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, policyv1.AddToScheme, autoscalingv2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	decode := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	files, _ := filepath.Glob("*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests")
	}
	var m manifests
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for n := 1; ; n++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, _, err := decode.Decode(doc, nil, nil)
			if err != nil {
				t.Errorf("%s document %d: %v", f, n, err)
				continue
			}
			switch o := obj.(type) {
			case *appsv1.Deployment:
				m.deployments = append(m.deployments, o)
			case *appsv1.StatefulSet:
				m.statefulSets = append(m.statefulSets, o)
			case *corev1.Service:
				m.services = append(m.services, o)
			case *corev1.ConfigMap:
				m.configMaps = append(m.configMaps, o)
			case *policyv1.PodDisruptionBudget:
				m.pdbs = append(m.pdbs, o)
			case *autoscalingv2.HorizontalPodAutoscaler:
				m.hpas = append(m.hpas, o)
			default:
				t.Errorf("%s document %d: unexpected kind %T", f, n, obj)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return m
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(append(out, l...), '\n')
		}
	}
	return out
}

func TestStrictDecodeCatchesMistakes(t *testing.T) {
	scheme := runtime.NewScheme()
	appsv1.AddToScheme(scheme)
	decode := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	for name, doc := range map[string]string{
		"unknown field":   "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicaz: 2}\n",
		"duplicate field": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: 2, replicas: 3}\n",
		"wrong type":      "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: two}\n",
		"unknown kind":    "apiVersion: apps/v1\nkind: Deploymint\nmetadata: {name: x}\n",
	} {
		if _, _, err := decode.Decode([]byte(doc), nil, nil); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func podSelected(sel map[string]string, pod map[string]string) bool {
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(pod))
}

// secretish names an environment variable that must come from a Secret.
var secretish = regexp.MustCompile(`SECRET|TOKEN|KEY|PASSWORD|DATABASE_URL`)

func checkPod(t *testing.T, what string, spec corev1.PodSpec, wantProbes bool) {
	t.Helper()
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("%s: pod does not require a non-root user", what)
	}
	for _, c := range spec.Containers {
		if c.Image == "" || strings.HasSuffix(c.Image, ":latest") {
			t.Errorf("%s: container %s image %q: name a tag", what, c.Name, c.Image)
		}
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil ||
			!slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("%s: container %s: want allowPrivilegeEscalation false, readOnlyRootFilesystem, capabilities drop ALL", what, c.Name)
		}
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			t.Errorf("%s: container %s has no memory limit", what, c.Name)
		}
		for _, e := range c.Env {
			if secretish.MatchString(e.Name) && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
				t.Errorf("%s: %s must come from a Secret (secretKeyRef), not a value", what, e.Name)
			}
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
		for kind, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
			if p == nil || p.HTTPGet == nil {
				t.Errorf("%s: container %s has no HTTP %s probe", what, c.Name, kind)
				continue
			}
			if !ports[p.HTTPGet.Port.String()] {
				t.Errorf("%s: %s probe's port %q is not a named container port", what, kind, p.HTTPGet.Port.String())
			}
		}
		if wantProbes {
			if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path != "/livez" {
				t.Errorf("%s: liveness probe on %s, want /livez", what, c.LivenessProbe.HTTPGet.Path)
			}
			if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/readyz" {
				t.Errorf("%s: readiness probe on %s, want /readyz", what, c.ReadinessProbe.HTTPGet.Path)
			}
		}
	}
}

func TestDeployments(t *testing.T) {
	m := load(t)
	var got []string
	for _, d := range m.deployments {
		what := "Deployment " + d.Name
		tmpl := d.Spec.Template
		if d.Spec.Selector == nil || !podSelected(d.Spec.Selector.MatchLabels, tmpl.Labels) {
			t.Errorf("%s: selector does not select its own pods", what)
		}
		if len(tmpl.Spec.Containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", what, len(tmpl.Spec.Containers))
		}
		c := tmpl.Spec.Containers[0]
		if len(c.Args) == 0 || !slices.Contains(roles, c.Args[0]) {
			t.Errorf("%s: args %v do not start with a role", what, c.Args)
			continue
		}
		role := c.Args[0]
		got = append(got, role)
		if d.Name != "regressd-"+role {
			t.Errorf("%s runs role %s", what, role)
		}
		checkPod(t, what, tmpl.Spec, true)
		if role != "gateway" && !slices.Contains(c.Args, "--replicas") {
			t.Errorf("%s: no --replicas for the 3-node NATS cluster", what)
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			env[e.Name] = e
		}
		for _, name := range []string{"REGRESSD_SECRET", "REGRESSD_AUTH_TOKENS"} {
			if _, ok := env[name]; !ok {
				t.Errorf("%s: no %s (the HTTP address is not loopback, and every role must share the secret)", what, name)
			}
		}
		if _, ok := env["REGRESSD_DATABASE_URL"]; ok == (role == "worker") {
			t.Errorf("%s: REGRESSD_DATABASE_URL given=%v; only the worker has no database", what, ok)
		}
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || !m.hasConfigMap(c.EnvFrom[0].ConfigMapRef.Name) {
			t.Errorf("%s: envFrom does not name a ConfigMap defined here", what)
		}
		if tmpl.Annotations["prometheus.io/scrape"] != "true" {
			t.Errorf("%s: pods not marked for scraping", what)
		}
		if g := tmpl.Spec.TerminationGracePeriodSeconds; g == nil || *g < 30 {
			t.Errorf("%s: terminationGracePeriodSeconds below the roles' 25 s shutdown", what)
		}
	}
	slices.Sort(got)
	want := slices.Clone(roles)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("deployments run roles %v, want one each of %v", got, want)
	}
}

func (m manifests) hasConfigMap(name string) bool {
	return slices.ContainsFunc(m.configMaps, func(c *corev1.ConfigMap) bool { return c.Name == name })
}

// Every workload has a PodDisruptionBudget that selects its pods and lets
// at most one be disrupted at a time.
func TestDisruptionBudgets(t *testing.T) {
	m := load(t)
	workloads := map[string]map[string]string{}
	for _, d := range m.deployments {
		workloads["Deployment "+d.Name] = d.Spec.Template.Labels
	}
	for _, s := range m.statefulSets {
		workloads["StatefulSet "+s.Name] = s.Spec.Template.Labels
	}
	for what, pod := range workloads {
		n := 0
		for _, p := range m.pdbs {
			if p.Spec.Selector != nil && podSelected(p.Spec.Selector.MatchLabels, pod) {
				n++
				if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 {
					t.Errorf("PDB %s: want maxUnavailable 1", p.Name)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s: %d PodDisruptionBudgets select its pods, want 1", what, n)
		}
	}
}

// Services select pods that exist and target ports those pods name.
func TestServices(t *testing.T) {
	m := load(t)
	pods := map[string]corev1.PodTemplateSpec{}
	for _, d := range m.deployments {
		pods["Deployment "+d.Name] = d.Spec.Template
	}
	for _, s := range m.statefulSets {
		pods["StatefulSet "+s.Name] = s.Spec.Template
	}
	for _, svc := range m.services {
		matched := 0
		for what, tmpl := range pods {
			if !podSelected(svc.Spec.Selector, tmpl.Labels) {
				continue
			}
			matched++
			for _, p := range svc.Spec.Ports {
				found := false
				for _, c := range tmpl.Spec.Containers {
					for _, cp := range c.Ports {
						found = found || cp.Name == p.TargetPort.String()
					}
				}
				if !found {
					t.Errorf("Service %s port %s targets %q, which %s does not name", svc.Name, p.Name, p.TargetPort.String(), what)
				}
			}
		}
		if matched != 1 {
			t.Errorf("Service %s selects the pods of %d workloads, want 1", svc.Name, matched)
		}
	}
}

// The worker scales on the batches waiting for it.
func TestWorkerAutoscaler(t *testing.T) {
	m := load(t)
	if len(m.hpas) != 1 {
		t.Fatalf("%d HorizontalPodAutoscalers, want 1", len(m.hpas))
	}
	h := m.hpas[0]
	if r := h.Spec.ScaleTargetRef; r.Kind != "Deployment" || r.Name != "regressd-worker" {
		t.Errorf("HPA scales %s %s, want Deployment regressd-worker", r.Kind, r.Name)
	}
	if len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].External == nil {
		t.Fatalf("HPA metrics %+v, want one external metric", h.Spec.Metrics)
	}
	ext := h.Spec.Metrics[0].External
	want := map[string]string{"stream": "REGRESS_BATCHES", "consumer": "worker"}
	if ext.Metric.Name != "regressd_consumer_pending_messages" || ext.Metric.Selector == nil ||
		fmt.Sprint(ext.Metric.Selector.MatchLabels) != fmt.Sprint(want) {
		t.Errorf("HPA metric %s %v, want regressd_consumer_pending_messages %v", ext.Metric.Name, ext.Metric.Selector, want)
	}
	if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || h.Spec.MaxReplicas <= *h.Spec.MinReplicas {
		t.Errorf("HPA replicas min %v max %d", h.Spec.MinReplicas, h.Spec.MaxReplicas)
	}
}

// The NATS cluster: three nodes on the repository's own node config, each
// routing to every node through the headless Service's stable names.
func TestNATSCluster(t *testing.T) {
	m := load(t)
	if len(m.statefulSets) != 1 {
		t.Fatalf("%d StatefulSets, want 1", len(m.statefulSets))
	}
	s := m.statefulSets[0]
	if s.Spec.Replicas == nil || *s.Spec.Replicas != 3 {
		t.Errorf("NATS replicas %v, want 3", s.Spec.Replicas)
	}
	if !podSelected(s.Spec.Selector.MatchLabels, s.Spec.Template.Labels) {
		t.Error("StatefulSet selector does not select its pods")
	}
	var headless *corev1.Service
	for _, svc := range m.services {
		if svc.Name == s.Spec.ServiceName {
			headless = svc
		}
	}
	if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Fatalf("serviceName %q is not a headless Service publishing unready nodes", s.Spec.ServiceName)
	}
	checkPod(t, "StatefulSet "+s.Name, s.Spec.Template.Spec, false)
	if len(s.Spec.VolumeClaimTemplates) != 1 {
		t.Errorf("NATS has %d volume claim templates, want 1 (the JetStream store)", len(s.Spec.VolumeClaimTemplates))
	}
	c := s.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	var want []string
	for i := range 3 {
		want = append(want, fmt.Sprintf("nats-route://%s-%d.%s:6222", s.Name, i, headless.Name))
	}
	if got := env["NATS_ROUTES"]; got != "["+strings.Join(want, ", ")+"]" {
		t.Errorf("NATS_ROUTES %q, want every node: %v", got, want)
	}
	for _, v := range []string{"NATS_LISTEN", "NATS_STORE_DIR", "NATS_CLUSTER_LISTEN"} {
		if env[v] == "" {
			t.Errorf("%s unset", v)
		}
	}
	conf, err := os.ReadFile("../nats/cluster.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range m.configMaps {
		if cm.Name == "nats-config" {
			if cm.Data["cluster.conf"] != string(conf) {
				t.Error("ConfigMap nats-config's cluster.conf differs from ops/nats/cluster.conf")
			}
			return
		}
	}
	t.Error("no ConfigMap nats-config")
}

// Secrets are referenced, never shipped.
func TestNoSecretsShipped(t *testing.T) {
	files, _ := filepath.Glob("*.yaml")
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		if regexp.MustCompile(`(?m)^kind:\s*Secret\s*$`).Match(raw) {
			t.Errorf("%s defines a Secret; reference one the operator creates", f)
		}
	}
	m := load(t)
	for _, cm := range m.configMaps {
		for k := range cm.Data {
			if secretish.MatchString(k) {
				t.Errorf("ConfigMap %s holds %s: a secret belongs in the Secret", cm.Name, k)
			}
		}
	}
}
