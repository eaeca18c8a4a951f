# The Nix flake: the package (built from this repository's source and Cargo.lock, with
# completions and man pages) and an overlay that adds pkgs.k3d-gpu.
#   nix run 'github:k3d-gpu/k3d-gpu?dir=packaging/nix' -- detect
#   overlay: inputs.k3d-gpu.overlays.default
{
  description = "k3d-gpu: GPU-ready local Kubernetes (k3d) from a declarative k3dgpu.toml";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
      # The repository root: this flake lives two levels down.
      root = ../..;
      package = { lib, rustPlatform, installShellFiles }:
        rustPlatform.buildRustPackage {
          pname = "k3d-gpu";
          version = "0.1.0";
          src = lib.cleanSourceWith {
            src = root;
            filter = path: type: baseNameOf path != "target" && lib.cleanSourceFilter path type;
          };
          cargoLock.lockFile = root + "/Cargo.lock";
          nativeBuildInputs = [ installShellFiles ];
          # The suite needs Docker and a registry; the binary is checked below instead.
          doCheck = false;
          doInstallCheck = true;
          installCheckPhase = ''
            $out/bin/k3d-gpu validate -c examples/nvidia-workstation.toml \
              --root tests/fixtures/hosts/desktop-rpl-nvidia >/dev/null
          '';
          postInstall = ''
            installShellCompletion --cmd k3d-gpu \
              --bash <($out/bin/k3d-gpu completions bash) \
              --zsh <($out/bin/k3d-gpu completions zsh) \
              --fish <($out/bin/k3d-gpu completions fish)
            $out/bin/k3d-gpu man --out man1
            installManPage man1/*.1
            install -Dm644 -t $out/share/doc/k3d-gpu README.md
            install -Dm644 -t $out/share/doc/k3d-gpu/docs docs/*.md
            install -Dm644 -t $out/share/doc/k3d-gpu/examples examples/*.toml examples/README.md
          '';
          meta = {
            description = "GPU-ready local Kubernetes (k3d) from a declarative k3dgpu.toml";
            homepage = "https://github.com/k3d-gpu/k3d-gpu";
            license = with lib.licenses; [ mit asl20 ];
            mainProgram = "k3d-gpu";
            platforms = lib.platforms.linux;
          };
        };
    in
    {
      overlays.default = final: _prev: { k3d-gpu = final.callPackage package { }; };
      packages = forAllSystems (pkgs: rec {
        k3d-gpu = pkgs.callPackage package { };
        default = k3d-gpu;
      });
    };
}
