"""CDI's upload API, served by virt-api: upload.cdi.kubevirt.io/v1beta1 UploadTokenRequests
(an aggregated API) and the upload proxy that takes a token and the image."""
