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
# `install` (the default) or `skip`: an image for a host with no NVIDIA GPU needs no toolkit,
# and the CI test that builds this file on stand-in bases has no network to fetch it.
ARG NVIDIA_CONTAINER_TOOLKIT=install
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# The toolkit from NVIDIA's apt repository, every package of it at the pinned version.
RUN mkdir -p /etc/cdi /var/run/cdi \
 && case "${NVIDIA_CONTAINER_TOOLKIT}" in \
      install) ;; \
      skip) exit 0 ;; \
      *) echo "NVIDIA_CONTAINER_TOOLKIT is install or skip, not ${NVIDIA_CONTAINER_TOOLKIT}" >&2; exit 1 ;; \
    esac \
 && apt-get update \
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
 && rm -rf /var/lib/apt/lists/*

# All of rancher/k3s's /bin over Ubuntu's, as k3d's CUDA guide does
# (docs/usage/advanced/cuda/Dockerfile): k3s and its links, containerd, the runc shim, runc,
# the CNI plugins (tests/upstream/k3s-package-bin.txt) and k3s-root's tools
# (tests/upstream/k3s-root-bin.txt). Above all its busybox /bin/sh: k3d runs every node
# through its own #!/bin/sh entrypoint under errexit, with `trap … SIGTERM …`, which Ubuntu's
# dash rejects, so a node on dash exits at once. k3s-root's ipset is what k3s's network
# policy controller needs (without it no NetworkPolicy is enforced), and aux/mount and
# aux/modprobe are links to its busybox. /bin is /usr/bin on Ubuntu, so k3d's entrypoint
# finds /bin/k3s. Nothing runs after this line: RUN's bash and the toolkit are Ubuntu's and
# NVIDIA's, and k3s's busybox applets now stand where some of Ubuntu's tools stood. k3s finds
# /usr/bin/nvidia-container-runtime at start and adds the nvidia runtime to its containerd
# config; the cluster's --default-runtime=nvidia makes it the default. `k3d-gpu apply` runs
# the built image under its own /bin/sh before any cluster (src/node_check.rs).
COPY --from=k3s /bin/ /usr/bin/

VOLUME /var/lib/kubelet
VOLUME /var/lib/rancher/k3s
VOLUME /var/lib/cni
VOLUME /var/log
ENV PATH="$PATH:/bin/aux"
ENV CRI_CONFIG_FILE="/var/lib/rancher/k3s/agent/etc/crictl.yaml"

LABEL io.k3d-gpu.k3s-version="${K3S_TAG}" \
      io.k3d-gpu.nvidia-container-toolkit="${NVIDIA_CONTAINER_TOOLKIT}" \
      io.k3d-gpu.nvidia-container-toolkit-version="${NVIDIA_CONTAINER_TOOLKIT_VERSION}"

ENTRYPOINT ["/bin/k3s"]
CMD ["agent"]
