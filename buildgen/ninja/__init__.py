"""The Ninja generator: plan the build from a manifest (actions.py), emit build.ninja
(emit.py over the escaping-only writer.py), and the gen/build/clean subcommands."""
