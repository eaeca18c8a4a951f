# The k3d-gpu node image: k3s from rancher/k3s on an Ubuntu base, with the NVIDIA container
# toolkit installed so k3s's containerd gets the nvidia runtime, and CDI on (containerd 2.x
# reads /etc/cdi and /var/run/cdi). No CUDA toolkit: the host's driver libraries reach pods
# through the runtime, and workloads bring their own CUDA. Nothing k3d-gpu applies itself
# (device plugins, policies) is baked in.
#
# `k3d-gpu apply` builds it as the plan's node-image action and passes K3S_DIGEST and
# UBUNTU_DIGEST from images.lock, so both bases are pinned by digest. A plain
# `docker build .` works too and then uses the tags alone.
ARG K3S_TAG=v1.37.1-k3s1
ARG K3S_DIGEST=
ARG UBUNTU_TAG=26.04
ARG UBUNTU_DIGEST=

FROM rancher/k3s:${K3S_TAG}${K3S_DIGEST:+@}${K3S_DIGEST} AS k3s

FROM ubuntu:${UBUNTU_TAG}${UBUNTU_DIGEST:+@}${UBUNTU_DIGEST}
ARG K3S_TAG
ARG NVIDIA_CONTAINER_TOOLKIT_VERSION=1.20.0-1
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# The toolkit from NVIDIA's apt repository, every package of it at the pinned version.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl gnupg \
 && curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey \
    | gpg --dearmor -o /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg \
 && curl -fsSL https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list \
    | sed 's#deb https://#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://#' \
    > /etc/apt/sources.list.d/nvidia-container-toolkit.list \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
    "nvidia-container-toolkit=${NVIDIA_CONTAINER_TOOLKIT_VERSION}" \
    "nvidia-container-toolkit-base=${NVIDIA_CONTAINER_TOOLKIT_VERSION}" \
    "libnvidia-container-tools=${NVIDIA_CONTAINER_TOOLKIT_VERSION}" \
    "libnvidia-container1=${NVIDIA_CONTAINER_TOOLKIT_VERSION}" \
 && apt-get purge -y curl gnupg \
 && apt-get autoremove -y \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /etc/cdi /var/run/cdi

# k3s as rancher/k3s lays it out (k3s-io/k3s scripts/build-*.sh and scripts/package-cli: the
# data tarball unpacked at /, tests/upstream/k3s-package-bin.txt): /bin/k3s is the server
# build, which unpacks no data dir, so the agent finds containerd, its runc shim, runc and the
# CNI plugins on PATH. Each is copied here (a source that is a link upstream, e.g. containerd
# -> k3s in a multicall build, arrives as the file it names), the helpers in /bin/aux, and
# the links made as upstream makes them. /bin is /usr/bin on Ubuntu, so k3d's entrypoint
# finds /bin/k3s. k3s finds /usr/bin/nvidia-container-runtime at start and adds the nvidia
# runtime to its containerd config; the cluster's --default-runtime=nvidia makes it the
# default. `k3d-gpu apply` checks the built image for these files before any cluster.
COPY --from=k3s /bin/k3s /bin/containerd /bin/containerd-shim-runc-v2 /bin/runc /bin/cni /bin/check-config /usr/bin/
COPY --from=k3s /bin/aux /usr/bin/aux
RUN for l in k3s-agent k3s-server k3s-token k3s-etcd-snapshot k3s-secrets-encrypt k3s-certificate k3s-completion kubectl crictl ctr; do ln -s k3s "/usr/bin/$l"; done \
 && for l in bandwidth bridge firewall flannel host-local loopback portmap; do ln -s cni "/usr/bin/$l"; done

VOLUME /var/lib/kubelet
VOLUME /var/lib/rancher/k3s
VOLUME /var/lib/cni
VOLUME /var/log
ENV PATH="$PATH:/bin/aux"
ENV CRI_CONFIG_FILE="/var/lib/rancher/k3s/agent/etc/crictl.yaml"

LABEL io.k3d-gpu.k3s-version="${K3S_TAG}" \
      io.k3d-gpu.nvidia-container-toolkit-version="${NVIDIA_CONTAINER_TOOLKIT_VERSION}"

ENTRYPOINT ["/bin/k3s"]
CMD ["agent"]
