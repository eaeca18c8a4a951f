# Homebrew formula (Linux: k3d-gpu reads sysfs). Put it in a tap's Formula/ directory, or
# install it directly: brew install --formula ./packaging/homebrew/k3d-gpu.rb
class K3dGpu < Formula
  desc "GPU-ready local Kubernetes (k3d) from a declarative k3dgpu.toml"
  homepage "https://github.com/k3d-gpu/k3d-gpu"
  url "https://github.com/k3d-gpu/k3d-gpu.git",
      tag:      "v0.1.0"
  license any_of: ["MIT", "Apache-2.0"]
  head "https://github.com/k3d-gpu/k3d-gpu.git", branch: "main"

  depends_on "rust" => :build
  depends_on :linux

  def install
    system "cargo", "install", *std_cargo_args
    generate_completions_from_executable(bin/"k3d-gpu", "completions")
    system bin/"k3d-gpu", "man", "--out", buildpath/"man1"
    man1.install Dir[buildpath/"man1/*.1"]
    doc.install "README.md", "docs"
    pkgshare.install "examples"
  end

  test do
    assert_equal "k3d-gpu #{version}", shell_output("#{bin}/k3d-gpu --version").strip
    assert_match "k3d-gpu-validate", shell_output("#{bin}/k3d-gpu man")
    system bin/"k3d-gpu", "schema"
  end
end
