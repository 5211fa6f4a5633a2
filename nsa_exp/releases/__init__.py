"""The release arm's CPU side: each FLA release in its own environment, what its source launches, the release
config, and the release result built from a measured point (the GPU side is :mod:`nsa_exp.gpu.release`)."""
