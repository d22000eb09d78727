# tests/gui holds the real-window Blender harness (run by tests/gui/run_gui_test.sh / make gui-test,
# root + chroot); none of it is a pytest test and none of it imports under the bpy module.
collect_ignore_glob = ["*.py"]
