// REVERB_EXPORT marks the classes and functions that libreverb exports.
//
// libreverb is compiled with hidden visibility and linked with an explicit
// export list (cc/libreverb.map), so everything it pulls in from gRPC,
// protobuf and abseil stays private to it. Only what is marked here (and
// the generated protocol buffer classes, see CMakeLists.txt) is visible to
// the Python bindings, the TensorFlow ops and C++ programs that link it.
#ifndef REVERB_CC_SUPPORT_EXPORT_H_
#define REVERB_CC_SUPPORT_EXPORT_H_

#ifndef REVERB_EXPORT
#define REVERB_EXPORT __attribute__((visibility("default")))
#endif

#endif  // REVERB_CC_SUPPORT_EXPORT_H_
