package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/framer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// writeFixtures writes, into dir:
//
//	pod.pb, pod.json            one realistic pod (several containers, env, probes, resources,
//	                            volumes, tolerations, managedFields, status), both encodings
//	pod-list.pb, pod-list.json  a PodList of two such pods, resourceVersion 1234
//	watch-stream.pb             a protobuf watch stream: ADDED and MODIFIED web-0, a BOOKMARK
//	                            with k8s.io/initial-events-end, an ERROR with a 410 Status
func writeFixtures(dir string) error {
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	raw := protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)
	js := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})
	write := func(name string, obj runtime.Object, enc runtime.Encoder) error {
		var b bytes.Buffer
		if err := enc.Encode(obj, &b); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return os.WriteFile(filepath.Join(dir, name), bytes.TrimRight(b.Bytes(), "\n"), 0o644)
	}
	pod := realisticPod("web-0")
	pod2 := realisticPod("web-1")
	list := &corev1.PodList{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "1234"},
		Items:    []corev1.Pod{*pod, *pod2},
	}
	for _, f := range []struct {
		name string
		obj  runtime.Object
	}{{"pod", pod}, {"pod-list", list}} {
		if err := write(f.name+".pb", f.obj, pb); err != nil {
			return err
		}
		if err := write(f.name+".json", f.obj, js); err != nil {
			return err
		}
	}

	modified := pod.DeepCopy()
	modified.ResourceVersion = "1301"
	modified.Labels["tier"] = "frontend"
	bookmark := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: "1302",
			Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		},
	}
	status := &metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure,
		Message:  "too old resource version: 1 (1302)",
		Reason:   metav1.StatusReasonExpired,
		Code:     410,
	}
	var stream bytes.Buffer
	frames := framer.NewLengthDelimitedFrameWriter(&stream)
	for _, ev := range []struct {
		ty  string
		obj runtime.Object
	}{{"ADDED", pod}, {"MODIFIED", modified}, {"BOOKMARK", bookmark}, {"ERROR", status}} {
		var inner bytes.Buffer
		if err := pb.Encode(ev.obj, &inner); err != nil {
			return err
		}
		event := &metav1.WatchEvent{Type: ev.ty, Object: runtime.RawExtension{Raw: inner.Bytes()}}
		var frame bytes.Buffer
		if err := raw.Encode(event, &frame); err != nil {
			return err
		}
		if _, err := frames.Write(frame.Bytes()); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "watch-stream.pb"), stream.Bytes(), 0o644)
}

func realisticPod(name string) *corev1.Pod {
	created := metav1.NewTime(time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC))
	started := metav1.NewTime(created.Add(4 * time.Second))
	fields := metav1.FieldsV1{}
	fields.SetRawBytes([]byte(`{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:tier":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"5f0e1d3c-8a6b-4c21-9e3f-2b7d6a4c1e90\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{".":{},"k:{\"name\":\"LOG_LEVEL\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},"f:resources":{".":{},"f:limits":{".":{},"f:cpu":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}}}},"f:volumes":{".":{},"k:{\"name\":\"config\"}":{".":{},"f:configMap":{".":{},"f:name":{}},"f:name":{}}}}}`))
	statusFields := metav1.FieldsV1{}
	statusFields.SetRawBytes([]byte(`{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.244.1.17\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`))
	resources := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		}
	}
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/app", ReadOnly: true},
		{Name: "data", MountPath: "/var/lib/app"},
		{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
	}
	container := func(cname, image string, port int32) corev1.Container {
		return corev1.Container{
			Name:    cname,
			Image:   image,
			Command: []string{"/bin/" + cname},
			Args:    []string{"--port=" + fmt.Sprint(port), "--log-format=json"},
			Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
			Env: []corev1.EnvVar{
				{Name: "LOG_LEVEL", Value: "info"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
				{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
			},
			Resources:    resources("250m", "128Mi"),
			VolumeMounts: mounts,
			LivenessProbe: &corev1.Probe{
				ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
				InitialDelaySeconds: 10, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
			},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:   corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}},
				TimeoutSeconds: 1, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3,
			},
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot:             ptr.To(true),
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}
	}
	containerStatus := func(cname, image string) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name: cname, Ready: true, RestartCount: 0, Image: image,
			ImageID:     "registry.example.com/" + cname + "@sha256:3c4e5f6a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f80",
			ContainerID: "containerd://9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0",
			Started:     ptr.To(true),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: "web-", Namespace: "default",
			UID:               "7c9e6679-7425-40de-944b-e07fc1f90ae7",
			ResourceVersion:   "1287",
			CreationTimestamp: created,
			Labels:            map[string]string{"app": "web", "controller-revision-hash": "web-6d4f9b8c7", "statefulset.kubernetes.io/pod-name": name},
			Annotations:       map[string]string{"kubectl.kubernetes.io/restartedAt": "2025-03-14T09:20:00Z", "prometheus.io/scrape": "true"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web",
				UID: "5f0e1d3c-8a6b-4c21-9e3f-2b7d6a4c1e90", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created, FieldsType: "FieldsV1", FieldsV1: &fields},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &started, FieldsType: "FieldsV1", FieldsV1: &statusFields, Subresource: "status"},
			},
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{
				Name: "migrate", Image: "registry.example.com/migrate:1.4.2", Command: []string{"/migrate", "up"},
				Resources: resources("100m", "64Mi"), VolumeMounts: mounts[:1],
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			Containers: []corev1.Container{
				container("app", "registry.example.com/web:2.7.1", 8080),
				container("sidecar", "registry.example.com/proxy:1.29.0", 15001),
				container("metrics", "registry.example.com/exporter:0.15.0", 9100),
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}, DefaultMode: ptr.To[int32](0o644)}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Gi"))}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					DefaultMode: ptr.To[int32](0o644),
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					},
				}}},
			},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "web",
			NodeName:                      "node-3",
			Hostname:                      name,
			Subdomain:                     "web",
			SecurityContext:               &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000), RunAsUser: ptr.To[int64](1000)},
			SchedulerName:                 "default-scheduler",
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					TopologyKey:   "kubernetes.io/hostname",
				},
			}}}},
			Priority:           ptr.To[int32](0),
			EnableServiceLinks: ptr.To(true),
			PreemptionPolicy:   ptr.To(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
			},
			HostIP:    "192.168.10.13",
			HostIPs:   []corev1.HostIP{{IP: "192.168.10.13"}},
			PodIP:     "10.244.1.17",
			PodIPs:    []corev1.PodIP{{IP: "10.244.1.17"}},
			StartTime: &created,
			InitContainerStatuses: []corev1.ContainerStatus{{
				Name: "migrate", Image: "registry.example.com/migrate:1.4.2", Ready: true,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: created, FinishedAt: started}},
			}},
			ContainerStatuses: []corev1.ContainerStatus{
				containerStatus("app", "registry.example.com/web:2.7.1"),
				containerStatus("sidecar", "registry.example.com/proxy:1.29.0"),
				containerStatus("metrics", "registry.example.com/exporter:0.15.0"),
			},
			QOSClass: corev1.PodQOSBurstable,
		},
	}
}
