"""The tools file: TOML in, frozen values out (`model` the dataclasses, `load` the loader); nothing imported here."""
